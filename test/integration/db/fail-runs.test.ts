import assert from 'node:assert/strict';
import { it } from 'node:test';
import type { RunFailureRecord } from '../../../src/db/commit.types.ts';
import { commitBatch, commitSerialized } from '../../../src/db/commit-batch.ts';
import { serializeEntry } from '../../../src/db/commit-rows.ts';
import { claimCoordinatorLease } from '../../../src/db/coordinator-lease.ts';
import { FencedError, JournalConflictError, PermanentStoreError } from '../../../src/db/errors.ts';
import { failRuns } from '../../../src/db/fail-runs.ts';
import { readJournal } from '../../../src/db/journal.ts';
import { reclaimOwnRuns } from '../../../src/db/reclaim.ts';
import { listOwnedActiveRuns } from '../../../src/db/restore.ts';
import { describeEachKind, withTestDatabase } from '../../support/database.ts';
import { entry, rowCounts } from './fixtures.ts';

const ME = 'coord-a';

function record(runId: string, seq: number, isNewRun: boolean): RunFailureRecord {
  return {
    runId, isNewRun, seq, machineId: 'run', machineVersion: 1, workflowName: 'build', repository: isNewRun ? 'acme/new' : null,
    createdAt: 1_001, failedAt: 9_000, reason: `its state could not be stored: test ${runId}`,
  };
}

await describeEachKind('failRuns', (kind) => {
  it('fails an existing and a new run: failed with the reason, an error snapshot, jobs cancelled, no timers, outbox closed', () =>
    withTestDatabase(kind, async ({ db }) => {
      const { epoch } = await claimCoordinatorLease(db, { id: ME, ttlMs: 10_000, now: 0 });
      await commitBatch(db, { coordinatorId: ME, epoch, now: 1, entries: [entry('old', 1, {
        timers: [{ op: 'arm', deadlineId: 'ack', kind: 'ack', jobKey: 'compile', dueAt: 10 }],
        effects: [{ effectId: 'old:1:0', kind: 'sendDispatch', payload: {} }],
      })] });
      await failRuns(db, { coordinatorId: ME, epoch, records: [record('old', 2, false), record('new', 0, true)] });
      const runs = await db.selectFrom('runs').select(['run_id', 'status', 'failure_reason', 'finished_at', 'repository']).orderBy('run_id').execute();
      assert.deepEqual(runs, [
        { run_id: 'new', status: 'failed', failure_reason: 'its state could not be stored: test new', finished_at: 9_000, repository: 'acme/new' },
        { run_id: 'old', status: 'failed', failure_reason: 'its state could not be stored: test old', finished_at: 9_000, repository: 'acme/widgets' },
      ]);
      const snapshots = await db.selectFrom('run_snapshots').select(['run_id', 'seq', 'status', 'snapshot']).orderBy('run_id').execute();
      assert.deepEqual(snapshots.map((s) => [s.run_id, s.seq, s.status, (s.snapshot as { status: string }).status]), [['new', 0, 'failed', 'error'], ['old', 2, 'failed', 'error']]);
      assert.deepEqual(await db.selectFrom('jobs').select(['run_id', 'status']).execute(), [{ run_id: 'old', status: 'cancelled' }]);
      assert.equal((await rowCounts(db)).timers, 0);
      assert.equal((await db.selectFrom('outbox').select('done_at').executeTakeFirstOrThrow()).done_at, 9_000);
      assert.deepEqual((await readJournal(db, 'old')).map((e) => e.seq), [1], 'the journal keeps what was durable');
      assert.deepEqual(await db.selectFrom('run_owner').select(['run_id', 'live']).orderBy('run_id').execute(), [{ run_id: 'new', live: false }, { run_id: 'old', live: false }]);
      assert.deepEqual(await listOwnedActiveRuns(db, { coordinatorId: ME }), []);
      assert.deepEqual(await reclaimOwnRuns(db, { me: ME, myEpoch: epoch + 1 }), [], 'a restart restores neither');
    }));

  it('is fenced like a commit: a run owned by another coordinator is refused and nothing is written', () =>
    withTestDatabase(kind, async ({ db }) => {
      await claimCoordinatorLease(db, { id: ME, ttlMs: 10_000, now: 0 });
      await claimCoordinatorLease(db, { id: 'coord-b', ttlMs: 10_000, now: 0 });
      await commitBatch(db, { coordinatorId: 'coord-b', epoch: 1, now: 1, entries: [entry('theirs', 1)] });
      const before = await rowCounts(db);
      await assert.rejects(failRuns(db, { coordinatorId: ME, epoch: 1, records: [record('theirs', 2, false)] }), FencedError);
      await assert.rejects(failRuns(db, { coordinatorId: ME, epoch: 1, records: [record('theirs', 0, true)] }), JournalConflictError);
      assert.deepEqual(await rowCounts(db), before);
      assert.equal((await db.selectFrom('runs').select('status').executeTakeFirstOrThrow()).status, 'running');
    }));

  it('a row the database refuses is a PermanentStoreError naming its SQLSTATE', () =>
    withTestDatabase(kind, async ({ db }) => {
      await claimCoordinatorLease(db, { id: ME, ttlMs: 10_000, now: 0 });
      const overflow = entry('run-1', 1);
      overflow.jobs = overflow.jobs.map((job) => ({ ...job, attempt: 2 ** 31 }));
      await assert.rejects(commitSerialized(db, { coordinatorId: ME, epoch: 1, now: 1, entries: [serializeEntry(overflow)] }), (error: unknown) => {
        assert.ok(error instanceof PermanentStoreError, String(error));
        assert.equal(error.code, '22003');
        return true;
      });
      assert.equal((await rowCounts(db)).run_events, 0);
    }));
});
