import { it } from 'node:test';
import assert from 'node:assert/strict';
import type { Kysely } from 'kysely';
import { adoptRunsOf, readPeerLeases } from '../../../src/db/adoption.ts';
import { commitBatch } from '../../../src/db/commit-batch.ts';
import { claimCoordinatorLease, renewCoordinatorLease } from '../../../src/db/coordinator-lease.ts';
import { FencedError } from '../../../src/db/errors.ts';
import { ownedLiveRuns } from '../../../src/db/reclaim.ts';
import { publishPlacementRequests } from '../../../src/db/shared-agents.ts';
import type { Schema } from '../../../src/db/schema.ts';
import { describeEachKind, withTestDatabase } from '../../support/database.ts';
import { entry } from './fixtures.ts';

/** Coordinator `id` (lease until ttlMs) owning the given runs; the last one has finished. */
async function coordinatorWithRuns(db: Kysely<Schema>, id: string, ttlMs: number, runIds: string[]) {
  const { epoch } = await claimCoordinatorLease(db, { id, ttlMs, now: 0 });
  const entries = runIds.map((runId, i) => {
    const e = entry(runId, 1);
    if (i === runIds.length - 1) {
      e.snapshot = { ...e.snapshot, status: 'success' };
      e.run = { ...e.run, status: 'success', finishedAt: 2 };
    }
    return e;
  });
  if (entries.length > 0) await commitBatch(db, { coordinatorId: id, epoch, now: 1, entries });
  return epoch;
}

await describeEachKind('adoption', (kind) => {
  it('finds only coordinators whose lease ran out and that still own live runs', () =>
    withTestDatabase(kind, async ({ db }) => {
      await coordinatorWithRuns(db, 'dead', 1_000, ['r1', 'r1-done']);
      await coordinatorWithRuns(db, 'dead-idle', 1_000, []);
      await coordinatorWithRuns(db, 'dead-all-finished', 1_000, ['r3-done']);
      await coordinatorWithRuns(db, 'alive', 60_000, ['r2', 'r2-done']);
      assert.deepEqual((await readPeerLeases(db, { now: 1_000 })).expired, []);
      assert.deepEqual((await readPeerLeases(db, { now: 1_001 })).expired, [{ id: 'dead', epoch: 1, why: 'lease' }]);
    }));

  it('names the next lease to end among the peers with live runs, leaving out my own', () =>
    withTestDatabase(kind, async ({ db }) => {
      await coordinatorWithRuns(db, 'dead', 1_000, ['r1', 'r1-done']);
      await coordinatorWithRuns(db, 'me', 5_000, ['r4', 'r4-done']);
      await coordinatorWithRuns(db, 'idle', 6_000, []);
      await coordinatorWithRuns(db, 'alive', 60_000, ['r2', 'r2-done']);
      assert.deepEqual(await readPeerLeases(db, { now: 500, me: 'me' }), { expired: [], nextEnd: 1_000, nextOverdue: null });
      assert.deepEqual(await readPeerLeases(db, { now: 1_000, me: 'me' }), { expired: [], nextEnd: 1_000, nextOverdue: null }, 'a lease ends once now has passed it');
      assert.deepEqual(await readPeerLeases(db, { now: 1_001, me: 'me' }), { expired: [{ id: 'dead', epoch: 1, why: 'lease' }], nextEnd: 60_000, nextOverdue: null });
      assert.deepEqual(await readPeerLeases(db, { now: 1_001 }), { expired: [{ id: 'dead', epoch: 1, why: 'lease' }], nextEnd: 5_000, nextOverdue: null });
      assert.deepEqual(await readPeerLeases(db, { now: 60_001, me: 'me' }), { expired: [{ id: 'dead', epoch: 1, why: 'lease' }, { id: 'alive', epoch: 1, why: 'lease' }], nextEnd: null, nextOverdue: null });
    }));

  it('lists the live runs a coordinator owns under its epoch: the ones an adoption moved, with or without its answer', () =>
    withTestDatabase(kind, async ({ db }) => {
      const deadEpoch = await coordinatorWithRuns(db, 'dead', 1_000, ['r1', 'r2', 'r3-done']);
      const myEpoch = await coordinatorWithRuns(db, 'me', 60_000, ['r4', 'r4-done']);
      assert.deepEqual(await ownedLiveRuns(db, { me: 'me', myEpoch }), ['r4']);
      await adoptRunsOf(db, { deadId: 'dead', deadEpoch, me: 'me', myEpoch, now: 2_000 });
      assert.deepEqual(await ownedLiveRuns(db, { me: 'me', myEpoch }), ['r1', 'r2', 'r4']);
      assert.deepEqual(await ownedLiveRuns(db, { me: 'me', myEpoch: myEpoch + 1 }), [], 'only under the epoch asked for');
    }));

  it('moves the owner rows of the live runs, returns them and fences the dead coordinator; finished runs keep theirs', () =>
    withTestDatabase(kind, async ({ db }) => {
      const deadEpoch = await coordinatorWithRuns(db, 'dead', 1_000, ['r1', 'r2', 'r3-done']);
      const myEpoch = await coordinatorWithRuns(db, 'me', 60_000, []);
      const adopted = await adoptRunsOf(db, { deadId: 'dead', deadEpoch, me: 'me', myEpoch, now: 2_000 });
      assert.deepEqual(adopted, ['r1', 'r2']);
      const owners = await db.selectFrom('run_owner').selectAll().orderBy('run_id').execute();
      assert.deepEqual(owners, [
        { run_id: 'r1', coordinator_id: 'me', epoch: myEpoch, live: true },
        { run_id: 'r2', coordinator_id: 'me', epoch: myEpoch, live: true },
        { run_id: 'r3-done', coordinator_id: 'dead', epoch: deadEpoch, live: false },
      ]);
      const dead = await db.selectFrom('coordinators').select('epoch').where('id', '=', 'dead').executeTakeFirstOrThrow();
      assert.equal(dead.epoch, deadEpoch + 1);
      await assert.rejects(
        commitBatch(db, { coordinatorId: 'dead', epoch: deadEpoch, now: 2_001, entries: [entry('r1', 2)] }),
        FencedError,
      );
      await commitBatch(db, { coordinatorId: 'me', epoch: myEpoch, now: 2_001, entries: [entry('r1', 2)] });
      assert.deepEqual((await readPeerLeases(db, { now: 3_000 })).expired, [], 'nothing left to adopt');
    }));

  it("removes the dead coordinator's placement requests, which its restored runs ask for again; a peer's stay", () =>
    withTestDatabase(kind, async ({ db }) => {
      const deadEpoch = await coordinatorWithRuns(db, 'dead', 1_000, ['r1', 'r2-done']);
      const myEpoch = await coordinatorWithRuns(db, 'me', 60_000, []);
      const requests = (ownerId: string, runIds: string[]) =>
        publishPlacementRequests(db, { ownerId, now: 1, requests: runIds.map((runId) => ({ runId, jobKey: 'build', attempt: 1, requirements: {} })) });
      await requests('dead', ['r1', 'r2-done']);
      await requests('peer', ['p1']);
      await adoptRunsOf(db, { deadId: 'dead', deadEpoch, me: 'me', myEpoch, now: 2_000 });
      const left = await db.selectFrom('placement_requests').select(['run_id', 'owner_id']).execute();
      assert.deepEqual(left, [{ run_id: 'p1', owner_id: 'peer' }]);
    }));

  it('adopts nothing from a coordinator that is still alive or renewed in time', () =>
    withTestDatabase(kind, async ({ db }) => {
      const epoch = await coordinatorWithRuns(db, 'slow', 1_000, ['r1']);
      const myEpoch = await coordinatorWithRuns(db, 'me', 60_000, []);
      assert.deepEqual(await adoptRunsOf(db, { deadId: 'slow', deadEpoch: epoch, me: 'me', myEpoch, now: 999 }), []);
      assert.equal(await renewCoordinatorLease(db, { id: 'slow', epoch, ttlMs: 1_000, now: 1_500 }), true);
      assert.deepEqual(await adoptRunsOf(db, { deadId: 'slow', deadEpoch: epoch, me: 'me', myEpoch, now: 2_000 }), []);
      const owner = await db.selectFrom('run_owner').select('coordinator_id').executeTakeFirstOrThrow();
      assert.equal(owner.coordinator_id, 'slow');
      await commitBatch(db, { coordinatorId: 'slow', epoch, now: 2_001, entries: [entry('r1', 2)] });
    }));

  it('adopts nothing when the epoch seen is stale (the coordinator restarted)', () =>
    withTestDatabase(kind, async ({ db }) => {
      const epoch = await coordinatorWithRuns(db, 'dead', 1_000, ['r1']);
      await claimCoordinatorLease(db, { id: 'dead', ttlMs: 1_000, now: 100 });
      const myEpoch = await coordinatorWithRuns(db, 'me', 60_000, []);
      assert.deepEqual(await adoptRunsOf(db, { deadId: 'dead', deadEpoch: epoch, me: 'me', myEpoch, now: 5_000 }), []);
    }));

  it('of two concurrent adopters of the same dead coordinator exactly one wins', () =>
    withTestDatabase(kind, async ({ db }) => {
      for (let round = 0; round < 10; round++) {
        const dead = `dead-${round}`;
        const runs = Array.from({ length: 50 }, (_, i) => `${dead}-run-${i}`);
        const deadEpoch = await coordinatorWithRuns(db, dead, 1_000, [...runs, `${dead}-finished`]);
        const [a, b] = await Promise.all([
          claimCoordinatorLease(db, { id: `a-${round}`, ttlMs: 60_000, now: 0 }),
          claimCoordinatorLease(db, { id: `b-${round}`, ttlMs: 60_000, now: 0 }),
        ]);
        const results = await Promise.all([
          adoptRunsOf(db, { deadId: dead, deadEpoch, me: `a-${round}`, myEpoch: a.epoch, now: 5_000 }),
          adoptRunsOf(db, { deadId: dead, deadEpoch, me: `b-${round}`, myEpoch: b.epoch, now: 5_000 }),
        ]);
        const winners = results.filter((r) => r.length > 0);
        assert.equal(winners.length, 1, `round ${round}: ${JSON.stringify(results.map((r) => r.length))}`);
        assert.deepEqual(winners[0], [...runs].sort());
        const owners = await db
          .selectFrom('run_owner')
          .select(({ fn }) => ['coordinator_id', fn.countAll<number>().as('n')])
          .where('run_id', 'like', `${dead}-%`)
          .groupBy('coordinator_id')
          .execute();
        const adopters = owners.filter((o) => o.coordinator_id !== dead);
        assert.equal(adopters.length, 1, 'all live runs of the dead coordinator went to one adopter');
        assert.equal(Number(adopters[0]?.n), runs.length);
        assert.deepEqual(owners.filter((o) => o.coordinator_id === dead).map((o) => Number(o.n)), [1], 'its finished run stays with it');
      }
    }));

  it('a takeover waits for an in-flight commit of the old owner, which lands before the move', () =>
    withTestDatabase(kind, async ({ db }) => {
      const deadEpoch = await coordinatorWithRuns(db, 'old', 1_000, ['r1']);
      const myEpoch = await coordinatorWithRuns(db, 'me', 60_000, []);
      const entries = Array.from({ length: 300 }, (_, i) => entry('r1', i + 2, { isNewRun: false }));
      const [committed, adopted] = await Promise.allSettled([
        commitBatch(db, { coordinatorId: 'old', epoch: deadEpoch, now: 2_000, entries }),
        adoptRunsOf(db, { deadId: 'old', deadEpoch, me: 'me', myEpoch, now: 2_000 }),
      ]);
      assert.equal(adopted.status, 'fulfilled');
      const snapshot = await db.selectFrom('run_snapshots').select('seq').executeTakeFirstOrThrow();
      const events = await db.selectFrom('run_events').select(({ fn }) => fn.countAll<number>().as('n')).executeTakeFirstOrThrow();
      if (committed.status === 'fulfilled') {
        assert.equal(snapshot.seq, 301);
        assert.equal(events.n, 301);
      } else {
        assert.ok(committed.reason instanceof FencedError);
        assert.equal(snapshot.seq, 1);
        assert.equal(events.n, 1);
      }
    }));
});
