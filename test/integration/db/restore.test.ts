import { it } from 'node:test';
import assert from 'node:assert/strict';
import { commitBatch } from '../../../src/db/commit-batch.ts';
import { claimCoordinatorLease } from '../../../src/db/coordinator-lease.ts';
import { markEffectsDone } from '../../../src/db/effects.ts';
import { readJournal } from '../../../src/db/journal.ts';
import { listOwnedActiveRuns, loadRunsForRestore } from '../../../src/db/restore.ts';
import { describeEachKind, withTestDatabase } from '../../support/database.ts';
import { entry } from './fixtures.ts';

const ME = 'coord-a';

await describeEachKind('restore queries', (kind) => {
  it('loadRunsForRestore returns snapshot, journal tail, armed timers and only pending effects of each run', () =>
    withTestDatabase(kind, async ({ db }) => {
      const { epoch } = await claimCoordinatorLease(db, { id: ME, ttlMs: 10_000, now: 0 });
      await commitBatch(db, {
        coordinatorId: ME,
        epoch,
        now: 100,
        entries: [
          entry('run-1', 1, {
            timers: [
              { op: 'arm', deadlineId: 'queue:b', kind: 'queue', jobKey: 'b', dueAt: 9_000 },
              { op: 'arm', deadlineId: 'workflow', kind: 'workflow', jobKey: null, dueAt: 5_000 },
            ],
            effects: [
              { effectId: 'run-1:1:0', kind: 'requestPlacement', payload: { jobKey: 'a' } },
              { effectId: 'run-1:1:1', kind: 'requestPlacement', payload: { jobKey: 'b' } },
            ],
          }),
          entry('run-2', 1),
        ],
      });
      await commitBatch(db, {
        coordinatorId: ME,
        epoch,
        now: 200,
        entries: [entry('run-1', 2, { effects: [{ effectId: 'run-1:2:0', kind: 'sendDispatch', payload: ['x'] }] })],
      });
      await commitBatch(db, {
        coordinatorId: ME,
        epoch,
        now: 250,
        entries: [
          // run-2's snapshot stays at seq 1: seq 2 changed the state, seq 3 did not; both are its tail.
          // A batch of such entries alone stores no snapshot, and still the run row of the changed state.
          entry('run-2', 2, { deferSnapshot: true, run: { ...entry('run-2', 2).run, status: 'queued' } }),
          entry('run-2', 3, { deferSnapshot: true, unchanged: true, jobs: [] }),
        ],
      });
      await markEffectsDone(db, { effectIds: ['run-1:1:0', 'unknown'], now: 300 });
      await markEffectsDone(db, { effectIds: ['run-1:1:0'], now: 400 });

      const restored = await loadRunsForRestore(db, ['run-1', 'run-2', 'missing', 'run-1']);
      assert.deepEqual(restored, [
        {
          runId: 'run-1',
          seq: 2,
          machineId: 'run',
          machineVersion: 1,
          snapshot: { status: 'active', value: 's2', context: { seq: 2 } },
          status: 'running',
          tail: [],
          timers: [
            { deadlineId: 'workflow', kind: 'workflow', jobKey: null, dueAt: 5_000 },
            { deadlineId: 'queue:b', kind: 'queue', jobKey: 'b', dueAt: 9_000 },
          ],
          pendingEffects: [
            { effectId: 'run-1:1:1', kind: 'requestPlacement', payload: { jobKey: 'b' } },
            { effectId: 'run-1:2:0', kind: 'sendDispatch', payload: ['x'] },
          ],
        },
        {
          runId: 'run-2',
          seq: 1,
          machineId: 'run',
          machineVersion: 1,
          snapshot: { status: 'active', value: 's1', context: { seq: 1 } },
          status: 'running',
          tail: [
            { seq: 2, event: { type: 'test.event', at: 1_002, n: 2 } },
            { seq: 3, event: { type: 'test.event', at: 1_003, n: 3 } },
          ],
          timers: [],
          pendingEffects: [],
        },
      ]);
      const run2 = await db.selectFrom('runs').select(['status', 'updated_at']).where('run_id', '=', 'run-2').executeTakeFirstOrThrow();
      assert.deepEqual(run2, { status: 'queued', updated_at: 1_003 }, 'a deferred snapshot still writes the run row of a changed state');
      const done = await db.selectFrom('outbox').select('done_at').where('effect_id', '=', 'run-1:1:0').executeTakeFirstOrThrow();
      assert.equal(done.done_at, 300, 'the first completion time is kept');
      assert.deepEqual(await loadRunsForRestore(db, []), []);
    }));

  it('loads 10 000 runs in a few batched queries', () =>
    withTestDatabase(kind, async ({ db }) => {
      const { epoch } = await claimCoordinatorLease(db, { id: ME, ttlMs: 10_000, now: 0 });
      const ids = Array.from({ length: 10_000 }, (_, i) => `run-${String(i).padStart(5, '0')}`);
      for (let i = 0; i < ids.length; i += 1_000) {
        const entries = ids.slice(i, i + 1_000).map((id) =>
          entry(id, 1, {
            timers: [{ op: 'arm', deadlineId: 'ack', kind: 'ack', jobKey: 'compile', dueAt: 7 }],
            effects: [{ effectId: `${id}:1:0`, kind: 'requestPlacement', payload: {} }],
          }),
        );
        await commitBatch(db, { coordinatorId: ME, epoch, now: 1, entries });
      }
      const started = performance.now();
      const restored = await loadRunsForRestore(db, ids);
      const ms = performance.now() - started;
      assert.equal(restored.length, 10_000);
      assert.ok(restored.every((r) => r.timers.length === 1 && r.pendingEffects.length === 1));
      assert.ok(ms < 5_000, `took ${Math.round(ms)} ms`);
    }));

  it('listOwnedActiveRuns lists my unfinished runs only', () =>
    withTestDatabase(kind, async ({ db }) => {
      const { epoch } = await claimCoordinatorLease(db, { id: ME, ttlMs: 10_000, now: 0 });
      await claimCoordinatorLease(db, { id: 'other', ttlMs: 10_000, now: 0 });
      const finished = (runId: string, status: string) => {
        const e = entry(runId, 1);
        e.run = { ...e.run, status, finishedAt: 5 };
        return e;
      };
      await commitBatch(db, {
        coordinatorId: ME,
        epoch,
        now: 1,
        entries: [entry('b-active', 1), entry('a-active', 1), finished('c-ok', 'success'), finished('d-bad', 'failed'), finished('e-x', 'cancelled')],
      });
      await commitBatch(db, { coordinatorId: 'other', epoch: 1, now: 1, entries: [entry('theirs', 1)] });
      assert.deepEqual(await listOwnedActiveRuns(db, { coordinatorId: ME }), ['a-active', 'b-active']);
    }));

  it('readJournal returns events in seq order, numerically', () =>
    withTestDatabase(kind, async ({ db }) => {
      const { epoch } = await claimCoordinatorLease(db, { id: ME, ttlMs: 10_000, now: 0 });
      const entries = [1, 2, 10, 3, 11].map((seq) => entry('run-1', seq));
      await commitBatch(db, { coordinatorId: ME, epoch, now: 1, entries });
      assert.deepEqual((await readJournal(db, 'run-1')).map((e) => e.seq), [1, 2, 3, 10, 11]);
      assert.deepEqual(await readJournal(db, 'nothing'), []);
    }));
});
