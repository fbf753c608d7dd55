import { it } from 'node:test';
import assert from 'node:assert/strict';
import type { Kysely } from 'kysely';
import * as liveOwners from '../../../migrations/013_live_owners.ts';
import { adoptRunsOf, readPeerLeases } from '../../../src/db/adoption.ts';
import { commitBatch } from '../../../src/db/commit-batch.ts';
import type { CommitEntry } from '../../../src/db/commit.types.ts';
import { claimCoordinatorLease } from '../../../src/db/coordinator-lease.ts';
import { enqueueRunEvent, peekInbox } from '../../../src/db/inbox.ts';
import { reclaimOwnRuns } from '../../../src/db/reclaim.ts';
import { listOwnedActiveRuns } from '../../../src/db/restore.ts';
import type { Schema } from '../../../src/db/schema.ts';
import { describeEachKind, withTestDatabase } from '../../support/database.ts';
import { entry } from './fixtures.ts';

// A finished run's owner row leaves every set a coordinator walks, so a restart or a takeover costs
// the live runs and not every run ever owned (moving 100,000 finished rows took 0.7 s per takeover).

const ME = 'coord-a';

function finishing(runId: string, seq: number): CommitEntry {
  const e = entry(runId, seq);
  return { ...e, snapshot: { ...e.snapshot, status: 'success' }, run: { ...e.run, status: 'success', finishedAt: 2_000 } };
}

const owners = (db: Kysely<Schema>) => db.selectFrom('run_owner').select(['run_id', 'coordinator_id', 'epoch', 'live']).orderBy('run_id').execute();

await describeEachKind('live owner rows', (kind) => {
  it('the commit that finishes a run, or creates it finished, marks its owner row not live', () =>
    withTestDatabase(kind, async ({ db }) => {
      const { epoch } = await claimCoordinatorLease(db, { id: ME, ttlMs: 60_000, now: 0 });
      await commitBatch(db, { coordinatorId: ME, epoch, now: 1, entries: [entry('running', 1), entry('ends', 1), finishing('born-done', 1)] });
      await commitBatch(db, { coordinatorId: ME, epoch, now: 2, entries: [finishing('ends', 2), entry('running', 2)] });
      assert.deepEqual((await owners(db)).map((o) => [o.run_id, o.live]), [['born-done', false], ['ends', false], ['running', true]]);
      assert.deepEqual(await listOwnedActiveRuns(db, { coordinatorId: ME }), ['running']);
    }));

  it('a restart takes back only the live runs: finished rows are not rewritten', () =>
    withTestDatabase(kind, async ({ db }) => {
      const { epoch } = await claimCoordinatorLease(db, { id: ME, ttlMs: 60_000, now: 0 });
      await commitBatch(db, { coordinatorId: ME, epoch, now: 1, entries: [entry('live', 1), finishing('done', 1)] });
      const again = await claimCoordinatorLease(db, { id: ME, ttlMs: 60_000, now: 10 });
      assert.deepEqual(await reclaimOwnRuns(db, { me: ME, myEpoch: again.epoch }), ['live']);
      assert.deepEqual(await owners(db), [
        { run_id: 'done', coordinator_id: ME, epoch, live: false },
        { run_id: 'live', coordinator_id: ME, epoch: again.epoch, live: true },
      ]);
      await commitBatch(db, { coordinatorId: ME, epoch: again.epoch, now: 11, entries: [entry('live', 2)] });
    }));

  it('a dead coordinator whose runs all finished is not adopted; one with live runs gives only those', () =>
    withTestDatabase(kind, async ({ db }) => {
      const idle = await claimCoordinatorLease(db, { id: 'dead-idle', ttlMs: 1_000, now: 0 });
      await commitBatch(db, { coordinatorId: 'dead-idle', epoch: idle.epoch, now: 1, entries: [finishing('old-1', 1), finishing('old-2', 1)] });
      const busy = await claimCoordinatorLease(db, { id: 'dead-busy', ttlMs: 1_000, now: 0 });
      await commitBatch(db, { coordinatorId: 'dead-busy', epoch: busy.epoch, now: 1, entries: [entry('open', 1), finishing('closed', 1)] });
      const me = await claimCoordinatorLease(db, { id: ME, ttlMs: 60_000, now: 0 });
      assert.deepEqual((await readPeerLeases(db, { now: 5_000 })).expired, [{ id: 'dead-busy', epoch: busy.epoch, why: 'lease' }]);
      assert.deepEqual(await adoptRunsOf(db, { deadId: 'dead-busy', deadEpoch: busy.epoch, me: ME, myEpoch: me.epoch, now: 5_000 }), ['open']);
      assert.deepEqual((await owners(db)).map((o) => [o.run_id, o.coordinator_id]), [['closed', 'dead-busy'], ['old-1', 'dead-idle'], ['old-2', 'dead-idle'], ['open', ME]]);
      assert.deepEqual((await readPeerLeases(db, { now: 5_000 })).expired, [], 'nothing live is left to adopt');
    }));

  it('an event for a finished or unknown run is not left in the inbox (and the sender is told); one for a live run is', () =>
    withTestDatabase(kind, async ({ db }) => {
      const { epoch } = await claimCoordinatorLease(db, { id: ME, ttlMs: 60_000, now: 0 });
      await commitBatch(db, { coordinatorId: ME, epoch, now: 1, entries: [entry('live', 1), finishing('done', 1)] });
      const kept: boolean[] = [];
      for (const runId of ['live', 'done', 'never-existed']) kept.push(await enqueueRunEvent(db, { runId, event: { type: 'run.cancel' }, now: 3 }));
      assert.deepEqual(kept, [true, false, false], 'so a peer that granted an agent to a run that ended gives the slot back');
      assert.deepEqual((await peekInbox(db, { coordinatorId: ME, limit: 10 })).map((e) => e.runId), ['live']);
      assert.equal(Number((await db.selectFrom('run_inbox').select((eb) => eb.fn.countAll().as('n')).executeTakeFirstOrThrow()).n), 1);
    }));

  it('the migration marks the rows of runs already finished, once', () =>
    withTestDatabase(kind, async ({ db }) => {
      const { epoch } = await claimCoordinatorLease(db, { id: ME, ttlMs: 60_000, now: 0 });
      await liveOwners.down(db as Kysely<unknown>);
      await commitBatchBefore013(db, epoch);
      await liveOwners.up(db as Kysely<unknown>);
      assert.deepEqual((await owners(db)).map((o) => [o.run_id, o.live]), [['done', false], ['live', true]]);
    }));
});

/** Rows as a build before migration 013 wrote them: no `live` column. */
async function commitBatchBefore013(db: Kysely<Schema>, epoch: number): Promise<void> {
  const rows = [
    { runId: 'live', status: 'running' },
    { runId: 'done', status: 'success' },
  ];
  for (const { runId, status } of rows) {
    await db.insertInto('run_owner').values({ run_id: runId, coordinator_id: ME, epoch }).execute();
    await db
      .insertInto('run_snapshots')
      .values({ run_id: runId, seq: 1, machine_id: 'run', machine_version: 1, snapshot: JSON.stringify({ status: 'active' }), status, updated_at: 1 })
      .execute();
  }
}
