import assert from 'node:assert/strict';
import { it } from 'node:test';
import { claimCoordinatorLease } from '../../../src/db/coordinator-lease.ts';
import { claimPlacementRequest, peerCoordinatorsAlive, publishPlacementRequest, reclaimPlacementRequest } from '../../../src/db/shared-agents.ts';
import { describeEachKind, withTestDatabase } from '../../support/database.ts';

const job = { runId: 'run-1', jobKey: 'build', attempt: 1, requirements: { runsOn: [] } };

await describeEachKind('placement requests shared by coordinators', (kind) => {
  it('a peer’s live claim keeps the owner from taking its request back; once it runs out the owner takes and removes it in one write', () =>
    withTestDatabase(kind, async ({ db }) => {
      await publishPlacementRequest(db, { ...job, ownerId: 'owner', now: 0 });
      assert.equal(await claimPlacementRequest(db, { ...job, me: 'peer', now: 10, ttlMs: 100 }), true, 'the peer claims it');
      assert.equal(await claimPlacementRequest(db, { ...job, me: 'third', now: 20, ttlMs: 100 }), false, 'a third coordinator does not');
      assert.equal(await reclaimPlacementRequest(db, { ...job, me: 'owner', now: 50 }), false, 'nor does the owner while the claim lives');
      assert.equal(await reclaimPlacementRequest(db, { ...job, me: 'owner', now: 200 }), true, 'the claim ran out');
      assert.equal((await db.selectFrom('placement_requests').selectAll().execute()).length, 0, 'and the request is gone');
      assert.equal(await reclaimPlacementRequest(db, { ...job, me: 'owner', now: 300 }), false, 'a request that is not there is not won');
    }));

  it('peers are alive while another coordinator’s lease runs', () =>
    withTestDatabase(kind, async ({ db }) => {
      await claimCoordinatorLease(db, { id: 'me', ttlMs: 1_000, now: 0 });
      assert.equal(await peerCoordinatorsAlive(db, 'me', 10), false, 'alone');
      await claimCoordinatorLease(db, { id: 'peer', ttlMs: 1_000, now: 0 });
      assert.equal(await peerCoordinatorsAlive(db, 'me', 10), true);
      assert.equal(await peerCoordinatorsAlive(db, 'me', 5_000), false, 'its lease ran out');
    }));
});
