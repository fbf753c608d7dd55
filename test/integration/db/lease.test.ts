import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { adoptRunsOf } from '../../../src/db/adoption.ts';
import { commitBatch } from '../../../src/db/commit-batch.ts';
import { claimCoordinatorLease, releaseCoordinatorLease, renewCoordinatorLease } from '../../../src/db/coordinator-lease.ts';
import { FencedError, TransientStoreError } from '../../../src/db/errors.ts';
import { systemClock } from '../../../actors/clock.ts';
import { createRunStore } from '../../../src/db/run-store.ts';
import { describeEachKind, skipReason, withFirstConnectionCut, withTestDatabase } from '../../support/database.ts';
import { entry, rowCounts } from './fixtures.ts';

await describeEachKind('coordinator lease', (kind) => {
  it('a new coordinator starts at epoch 1; a restart under the same id gets a new epoch', () =>
    withTestDatabase(kind, async ({ db }) => {
      assert.deepEqual(await claimCoordinatorLease(db, { id: 'a', ttlMs: 1000, now: 10, httpUrl: 'http://a' }), { epoch: 1 });
      assert.deepEqual(await claimCoordinatorLease(db, { id: 'a', ttlMs: 1000, now: 20 }), { epoch: 2 });
      assert.deepEqual(await claimCoordinatorLease(db, { id: 'b', ttlMs: 1000, now: 20 }), { epoch: 1 });
      const row = await db.selectFrom('coordinators').selectAll().where('id', '=', 'a').executeTakeFirstOrThrow();
      assert.deepEqual(row, { id: 'a', epoch: 2, lease_until: 1020, started_at: 20, http_url: null, liveness_key: null, renewed_at: 20 });
    }));

  it('renew extends the lease while the epoch is ours', () =>
    withTestDatabase(kind, async ({ db }) => {
      const { epoch } = await claimCoordinatorLease(db, { id: 'a', ttlMs: 1000, now: 0 });
      assert.equal(await renewCoordinatorLease(db, { id: 'a', epoch, ttlMs: 1000, now: 500 }), true);
      const row = await db.selectFrom('coordinators').select('lease_until').executeTakeFirstOrThrow();
      assert.equal(row.lease_until, 1500);
    }));

  it('renew returns false once the coordinator restarted elsewhere or was adopted', () =>
    withTestDatabase(kind, async ({ db }) => {
      const first = await claimCoordinatorLease(db, { id: 'a', ttlMs: 1000, now: 0 });
      await claimCoordinatorLease(db, { id: 'a', ttlMs: 1000, now: 10 });
      assert.equal(await renewCoordinatorLease(db, { id: 'a', epoch: first.epoch, ttlMs: 1000, now: 20 }), false);

      const b = await claimCoordinatorLease(db, { id: 'b', ttlMs: 1000, now: 0 });
      await commitBatch(db, { coordinatorId: 'b', epoch: b.epoch, now: 1, entries: [entry('run-1', 1)] });
      const c = await claimCoordinatorLease(db, { id: 'c', ttlMs: 10_000, now: 0 });
      assert.deepEqual(await adoptRunsOf(db, { deadId: 'b', deadEpoch: b.epoch, me: 'c', myEpoch: c.epoch, now: 2000 }), ['run-1']);
      assert.equal(await renewCoordinatorLease(db, { id: 'b', epoch: b.epoch, ttlMs: 1000, now: 2001 }), false);
    }));

  it('a commit under a stale epoch throws FencedError and writes nothing', () =>
    withTestDatabase(kind, async ({ db }) => {
      const old = await claimCoordinatorLease(db, { id: 'a', ttlMs: 1000, now: 0 });
      await commitBatch(db, { coordinatorId: 'a', epoch: old.epoch, now: 1, entries: [entry('run-1', 1)] });
      const before = await rowCounts(db);
      await claimCoordinatorLease(db, { id: 'a', ttlMs: 1000, now: 10 });
      const batch = [entry('run-1', 2), entry('run-2', 1, { effects: [{ effectId: 'fx', kind: 'k', payload: {} }] })];
      await assert.rejects(commitBatch(db, { coordinatorId: 'a', epoch: old.epoch, now: 11, entries: batch }), (error: unknown) => {
        assert.ok(error instanceof FencedError);
        assert.equal(error.name, 'FencedError');
        assert.equal(error.coordinatorId, 'a');
        assert.equal(error.epoch, old.epoch);
        assert.match(error.message, /epoch 2/);
        return true;
      });
      assert.deepEqual(await rowCounts(db), before);
    }));

  it('a commit by a coordinator without a lease row is fenced', () =>
    withTestDatabase(kind, async ({ db }) => {
      await assert.rejects(commitBatch(db, { coordinatorId: 'ghost', epoch: 1, now: 1, entries: [entry('r', 1)] }), FencedError);
      assert.equal((await rowCounts(db)).run_events, 0);
    }));

  it('release expires the lease at once, but only for the current epoch', () =>
    withTestDatabase(kind, async ({ db }) => {
      const { epoch } = await claimCoordinatorLease(db, { id: 'a', ttlMs: 1000, now: 0 });
      assert.equal(await releaseCoordinatorLease(db, { id: 'a', epoch: epoch + 1 }), false);
      assert.equal(await releaseCoordinatorLease(db, { id: 'a', epoch }), true);
      const row = await db.selectFrom('coordinators').select('lease_until').executeTakeFirstOrThrow();
      assert.equal(row.lease_until, 0);
    }));
});

describe('the start-up statements of the run store', { skip: await skipReason('external') }, () => {
  const identity = { coordinatorId: 'a', epoch: () => 1 };

  it('claim the lease through a connection cut under them (a coordinator starting while Postgres terminated its backends)', () =>
    withFirstConnectionCut({ migrated: true }, async (db) => {
      const { epoch } = await createRunStore(db, identity, systemClock).claimLease({ id: 'a', ttlMs: 1000, now: 0, livenessKey: null });
      assert.equal(Number(epoch), 1, 'claimed (this pool reads int8 as text)');
    }));

  it('reclaim their own runs through a connection cut under them', () =>
    withFirstConnectionCut({ migrated: true }, async (db) => {
      assert.deepEqual(await createRunStore(db, identity, systemClock).reclaimOwnRuns({ me: 'a', myEpoch: 1 }), []);
    }));

  it('say a read of runs cut under them is transient (ownership reads the moved runs again at its next scan)', () =>
    withFirstConnectionCut({ migrated: true }, async (db) => {
      await assert.rejects(createRunStore(db, identity, systemClock).loadRuns(['run-1']), TransientStoreError);
    }));
});
