import { it } from 'node:test';
import { sql } from 'kysely';
import assert from 'node:assert/strict';
import { commitBatch } from '../../../src/db/commit-batch.ts';
import type { CommitEntry } from '../../../src/db/commit.types.ts';
import { claimCoordinatorLease } from '../../../src/db/coordinator-lease.ts';
import { FencedError, JournalConflictError } from '../../../src/db/errors.ts';
import { readJournal } from '../../../src/db/journal.ts';
import { describeEachKind, withTestDatabase } from '../../support/database.ts';
import { entry, rowCounts } from './fixtures.ts';

const ME = 'coord-a';

await describeEachKind('commitBatch', (kind) => {
  const commit = async (db: Parameters<typeof commitBatch>[0], entries: CommitEntry[], epoch = 1, now = 5_000) =>
    commitBatch(db, { coordinatorId: ME, epoch, now, entries });

  it('writes owner, journal, snapshot, projections, timers and outbox of a new run', () =>
    withTestDatabase(kind, async ({ db }) => {
      await claimCoordinatorLease(db, { id: ME, ttlMs: 10_000, now: 0 });
      await commit(db, [
        entry('run-1', 1, {
          run: {
            workflowName: 'build', repository: 'acme/widgets', status: 'running', createdAt: 1_001, finishedAt: null,
            failureReason: null, initFailure: null, inputSummary: { sha: 'abc', files: ['a', 'b'] },
          },
          timers: [{ op: 'arm', deadlineId: 'ack:compile', kind: 'ack', jobKey: 'compile', dueAt: 11_000 }],
          effects: [{ effectId: 'run-1:1:0', kind: 'sendDispatch', payload: ['list', { ok: true }] }],
        }),
      ]);
      assert.deepEqual(await db.selectFrom('run_owner').selectAll().execute(), [{ run_id: 'run-1', coordinator_id: ME, epoch: 1, live: true }]);
      assert.deepEqual(await readJournal(db, 'run-1'), [
        { seq: 1, event: { type: 'test.event', at: 1_001, n: 1 }, receivedAt: 1_001, stateAfter: { value: 's1' } },
      ]);
      const writer = await db.selectFrom('run_events').select(['written_by', 'writer_epoch']).executeTakeFirstOrThrow();
      assert.deepEqual(writer, { written_by: ME, writer_epoch: 1 }, 'each journal row names the coordinator and epoch that wrote it');
      const snapshot = await db.selectFrom('run_snapshots').selectAll().executeTakeFirstOrThrow();
      assert.deepEqual(snapshot, {
        run_id: 'run-1', seq: 1, machine_id: 'run', machine_version: 1, status: 'running', updated_at: 1_001,
        snapshot: { status: 'active', value: 's1', context: { seq: 1 } },
      });
      const run = await db.selectFrom('runs').selectAll().executeTakeFirstOrThrow();
      assert.deepEqual(run, {
        run_id: 'run-1', workflow_name: 'build', repository: 'acme/widgets', status: 'running', created_at: 1_001,
        updated_at: 1_001, finished_at: null, failure_reason: null, init_failure: null, input_summary: { sha: 'abc', files: ['a', 'b'] },
        number: 1, // the first run of acme/widgets, numbered by the database (migration 019)
        archived_at: null,
      });
      const job = await db.selectFrom('jobs').selectAll().executeTakeFirstOrThrow();
      assert.deepEqual(job, {
        run_id: 'run-1', job_key: 'compile', status: 'queued', waiting_reason: null, attempt: 1, agent_id: null,
        dispatch_id: null, outcome: null, init_failure: null, updated_at: 1_001, steps: [], duration_ms: null, outputs: null, times: null,
      });
      assert.deepEqual(await db.selectFrom('timers').selectAll().execute(), [
        { run_id: 'run-1', deadline_id: 'ack:compile', kind: 'ack', job_key: 'compile', due_at: 11_000 },
      ]);
      assert.deepEqual(await db.selectFrom('outbox').selectAll().execute(), [
        { effect_id: 'run-1:1:0', run_id: 'run-1', kind: 'sendDispatch', payload: ['list', { ok: true }], created_at: 5_000, done_at: null },
      ]);
    }));

  it('folds consecutive entries of one run: all events, the latest snapshot and projections, the last timer change', () =>
    withTestDatabase(kind, async ({ db }) => {
      await claimCoordinatorLease(db, { id: ME, ttlMs: 10_000, now: 0 });
      await commit(db, [
        entry('run-1', 1, { timers: [{ op: 'arm', deadlineId: 'ack', kind: 'ack', jobKey: 'compile', dueAt: 10 }] }),
        entry('run-2', 1),
        entry('run-1', 2, {
          timers: [
            { op: 'disarm', deadlineId: 'ack' },
            { op: 'arm', deadlineId: 'lease', kind: 'lease', jobKey: 'compile', dueAt: 20 },
          ],
        }),
        entry('run-1', 3, { timers: [{ op: 'arm', deadlineId: 'lease', kind: 'lease', jobKey: 'compile', dueAt: 30 }] }),
      ]);
      assert.deepEqual((await readJournal(db, 'run-1')).map((e) => e.seq), [1, 2, 3]);
      const snapshots = await db.selectFrom('run_snapshots').select(['run_id', 'seq']).orderBy('run_id').execute();
      assert.deepEqual(snapshots, [{ run_id: 'run-1', seq: 3 }, { run_id: 'run-2', seq: 1 }]);
      const run = await db.selectFrom('runs').selectAll().where('run_id', '=', 'run-1').executeTakeFirstOrThrow();
      assert.equal(run.repository, 'acme/widgets', 'the repository given at creation sticks');
      assert.equal(run.updated_at, 1_003);
      const job = await db.selectFrom('jobs').select('attempt').where('run_id', '=', 'run-1').executeTakeFirstOrThrow();
      assert.equal(job.attempt, 3);
      assert.deepEqual(await db.selectFrom('timers').select(['run_id', 'deadline_id', 'due_at']).execute(), [
        { run_id: 'run-1', deadline_id: 'lease', due_at: 30 },
      ]);
    }));

  it('updates existing runs across batches and disarms their timers', () =>
    withTestDatabase(kind, async ({ db }) => {
      await claimCoordinatorLease(db, { id: ME, ttlMs: 10_000, now: 0 });
      await commit(db, [
        entry('run-1', 1, { timers: [{ op: 'arm', deadlineId: 'ack', kind: 'ack', jobKey: 'compile', dueAt: 10 }] }),
      ]);
      const finished = entry('run-1', 2, { timers: [{ op: 'disarm', deadlineId: 'ack' }] });
      finished.run = { ...finished.run, status: 'failed', finishedAt: 1_002, failureReason: 'compile failed', initFailure: { scope: 'run' } };
      await commit(db, [finished]);
      const run = await db.selectFrom('runs').selectAll().executeTakeFirstOrThrow();
      assert.equal(run.status, 'failed');
      assert.equal(run.repository, 'acme/widgets');
      assert.equal(run.finished_at, 1_002);
      assert.equal(run.failure_reason, 'compile failed');
      assert.deepEqual(run.init_failure, { scope: 'run' });
      assert.equal((await rowCounts(db)).timers, 0);
    }));

  it('an unchanged entry journals its event and moves only the snapshot seq; after a changed one in its batch, that snapshot is kept at the later seq', () =>
    withTestDatabase(kind, async ({ db }) => {
      await claimCoordinatorLease(db, { id: ME, ttlMs: 10_000, now: 0 });
      // What a restored run's `run.restored` writes when its jobs only ask for agents again: no snapshot, run or job rows.
      const unchanged = (seq: number) => entry('run-1', seq, { unchanged: true, snapshot: { ...entry('run-1', seq).snapshot, snapshot: null }, jobs: [] });
      await commit(db, [entry('run-1', 1)]);
      await commit(db, [unchanged(2)]);
      const afterUnchanged = await db.selectFrom('run_snapshots').selectAll().executeTakeFirstOrThrow();
      assert.deepEqual([afterUnchanged.seq, afterUnchanged.updated_at, afterUnchanged.snapshot], [2, 1_002, { status: 'active', value: 's1', context: { seq: 1 } }]);
      const run = await db.selectFrom('runs').select(['updated_at']).executeTakeFirstOrThrow();
      const job = await db.selectFrom('jobs').select(['attempt', 'updated_at']).executeTakeFirstOrThrow();
      assert.deepEqual([run.updated_at, job.attempt, job.updated_at], [1_001, 1, 1_001], 'the run and job rows stay as they were');
      assert.deepEqual((await readJournal(db, 'run-1')).map((e) => e.seq), [1, 2]);
      await commit(db, [entry('run-1', 3), unchanged(4)]);
      const folded = await db.selectFrom('run_snapshots').selectAll().executeTakeFirstOrThrow();
      assert.deepEqual([folded.seq, folded.snapshot], [4, { status: 'active', value: 's3', context: { seq: 3 } }]);
      assert.equal((await db.selectFrom('jobs').select('attempt').executeTakeFirstOrThrow()).attempt, 3);
      await commit(db, [unchanged(5), entry('run-1', 6)]);
      const changedLast = await db.selectFrom('run_snapshots').selectAll().executeTakeFirstOrThrow();
      assert.deepEqual([changedLast.seq, changedLast.snapshot], [6, { status: 'active', value: 's6', context: { seq: 6 } }]);
      assert.deepEqual((await readJournal(db, 'run-1')).map((e) => e.seq), [1, 2, 3, 4, 5, 6]);
    }));

  it('is a prepared statement per shape: later batches of the same shape are not parsed again', () =>
    withTestDatabase(kind, async ({ db }) => {
      await claimCoordinatorLease(db, { id: ME, ttlMs: 10_000, now: 0 });
      for (let i = 1; i <= 4; i++) await commit(db, [entry(`run-${i}`, 1)]);
      // One at a time, the pool hands out its one idle connection again: the statement is prepared there.
      const prepared = await sql<{ name: string }>`SELECT name FROM pg_prepared_statements WHERE statement LIKE '%fence AS%'`.execute(db);
      assert.equal(prepared.rows.length, 1, 'the four commits of one shape share one prepared statement');
      assert.match(prepared.rows[0]?.name ?? '', /^sy_[0-9a-f]{24}$/);
      assert.equal((await rowCounts(db)).runs, 4);
    }));

  it('never moves a snapshot back to an older seq', () =>
    withTestDatabase(kind, async ({ db }) => {
      await claimCoordinatorLease(db, { id: ME, ttlMs: 10_000, now: 0 });
      await commit(db, [entry('run-1', 1), { ...entry('run-1', 5), events: [] }]);
      await commit(db, [{ ...entry('run-1', 3), events: [] }]);
      const snapshot = await db.selectFrom('run_snapshots').select('seq').executeTakeFirstOrThrow();
      assert.equal(snapshot.seq, 5);
    }));

  it('a duplicate (run, seq) aborts the whole batch: JournalConflictError and no partial rows', () =>
    withTestDatabase(kind, async ({ db }) => {
      await claimCoordinatorLease(db, { id: ME, ttlMs: 10_000, now: 0 });
      await commit(db, [entry('run-1', 1)]);
      const before = await rowCounts(db);
      const batch = [
        entry('run-2', 1, { effects: [{ effectId: 'run-2:1:0', kind: 'k', payload: {} }] }),
        entry('run-1', 1, { isNewRun: false, timers: [{ op: 'arm', deadlineId: 'x', kind: 'x', jobKey: null, dueAt: 1 }] }),
      ];
      await assert.rejects(commit(db, batch), (error: unknown) => {
        assert.ok(error instanceof JournalConflictError, String(error));
        assert.match(error.message, /already journaled/);
        return true;
      });
      assert.deepEqual(await rowCounts(db), before);
    }));

  it('a duplicate seq inside one batch aborts it too', () =>
    withTestDatabase(kind, async ({ db }) => {
      await claimCoordinatorLease(db, { id: ME, ttlMs: 10_000, now: 0 });
      await assert.rejects(commit(db, [entry('run-1', 1), entry('run-1', 1, { isNewRun: false })]), JournalConflictError);
      const counts = await rowCounts(db);
      assert.deepEqual({ ...counts, coordinators: 0 }, { coordinators: 0, run_owner: 0, run_events: 0, run_snapshots: 0, runs: 0, jobs: 0, timers: 0, outbox: 0 });
    }));

  it('a run owned by another coordinator fences the whole batch', () =>
    withTestDatabase(kind, async ({ db }) => {
      await claimCoordinatorLease(db, { id: ME, ttlMs: 10_000, now: 0 });
      await claimCoordinatorLease(db, { id: 'coord-b', ttlMs: 10_000, now: 0 });
      await commitBatch(db, { coordinatorId: 'coord-b', epoch: 1, now: 1, entries: [entry('theirs', 1)] });
      await commit(db, [entry('mine', 1)]);
      const before = await rowCounts(db);
      await assert.rejects(commit(db, [entry('mine', 2), entry('theirs', 2)]), (error: unknown) => {
        assert.ok(error instanceof FencedError);
        assert.match(error.message, /1 of 2 runs/);
        return true;
      });
      assert.deepEqual(await rowCounts(db), before);
    }));

  it('an existing run without an owner row is refused', () =>
    withTestDatabase(kind, async ({ db }) => {
      await claimCoordinatorLease(db, { id: ME, ttlMs: 10_000, now: 0 });
      await assert.rejects(commit(db, [entry('orphan', 4, { isNewRun: false })]), FencedError);
    }));

  it('a run marked new that already exists is a conflict, not a silent takeover', () =>
    withTestDatabase(kind, async ({ db }) => {
      await claimCoordinatorLease(db, { id: ME, ttlMs: 10_000, now: 0 });
      await commit(db, [entry('run-1', 1)]);
      await assert.rejects(commit(db, [{ ...entry('run-1', 2), isNewRun: true }]), JournalConflictError);
    }));

  it('keeps an outbox effect committed twice once, with its first payload', () =>
    withTestDatabase(kind, async ({ db }) => {
      await claimCoordinatorLease(db, { id: ME, ttlMs: 10_000, now: 0 });
      await commit(db, [entry('run-1', 1, { effects: [{ effectId: 'fx', kind: 'k', payload: 1 }] })]);
      await commit(db, [entry('run-1', 2, { effects: [{ effectId: 'fx', kind: 'k', payload: 2 }] })]);
      assert.deepEqual(await db.selectFrom('outbox').select(['effect_id', 'payload']).execute(), [{ effect_id: 'fx', payload: 1 }]);
    }));

  it('stores any JSON: arrays, quotes, backslashes, unicode; a NUL character becomes U+FFFD', () =>
    withTestDatabase(kind, async ({ db }) => {
      await claimCoordinatorLease(db, { id: ME, ttlMs: 10_000, now: 0 });
      const event = { type: 'agent.log', lines: ['a "quoted" \\ path', 'ünï 😀', 'nul\u0000here', '\\u0000 literal'], nested: [[1], { x: null }] };
      await commit(db, [entry('run-1', 1, { events: [{ seq: 1, event, receivedAt: 1, stateAfter: [] }] })]);
      const [stored] = await readJournal(db, 'run-1');
      assert.deepEqual(stored?.event, { ...event, lines: ['a "quoted" \\ path', 'ünï 😀', 'nul\ufffdhere', '\\u0000 literal'] });
      assert.deepEqual(stored?.stateAfter, []);
    }));

  it('does nothing for an empty batch', () =>
    withTestDatabase(kind, async ({ db }) => {
      await commitBatch(db, { coordinatorId: 'nobody', epoch: 1, now: 0, entries: [] });
      assert.equal((await rowCounts(db)).run_events, 0);
    }));
});
