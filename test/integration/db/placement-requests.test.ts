import assert from 'node:assert/strict';
import { it } from 'node:test';
import { claimCoordinatorLease } from '../../../src/db/coordinator-lease.ts';
import { claimPlacementRequest, peerCoordinatorsAlive, placementStoreOf, publishPlacementRequests, reclaimPlacementRequest } from '../../../src/db/shared-agents.ts';
import { describeEachKind, withTestDatabase } from '../../support/database.ts';
import type { OfferedJob } from '../../../actors/agents/placement-exchange.ts';

const job: OfferedJob = { runId: 'run-1', jobKey: 'build', attempt: 1, requirements: { runsOn: [], excludeLabels: [], runsOnPick: 'any', executor: 'any' } };

await describeEachKind('placement requests shared by coordinators', (kind) => {
  it('a peer’s live claim keeps the owner from taking its request back; once it runs out the owner takes and removes it in one write', () =>
    withTestDatabase(kind, async ({ db }) => {
      await publishPlacementRequests(db, { ownerId: 'owner', now: 0, requests: [job] });
      assert.equal(await claimPlacementRequest(db, { ...job, me: 'peer', now: 10, ttlMs: 100 }), true, 'the peer claims it');
      assert.equal(await claimPlacementRequest(db, { ...job, me: 'third', now: 20, ttlMs: 100 }), false, 'a third coordinator does not');
      assert.equal(await reclaimPlacementRequest(db, { ...job, me: 'owner', now: 50 }), 'held', 'nor does the owner while the claim lives');
      assert.equal(await reclaimPlacementRequest(db, { ...job, me: 'owner', now: 200 }), 'taken', 'the claim ran out');
      assert.equal((await db.selectFrom('placement_requests').selectAll().execute()).length, 0, 'and the request is gone');
      assert.equal(await reclaimPlacementRequest(db, { ...job, me: 'owner', now: 300 }), 'absent', 'a request that is not there is not won, and says so');
    }));

  it("a coordinator takes back only a request it owns: a fenced one whose run moved leaves the new owner's request be", () =>
    withTestDatabase(kind, async ({ db }) => {
      await publishPlacementRequests(db, { ownerId: 'coord-a', now: 0, requests: [job] });
      await publishPlacementRequests(db, { ownerId: 'coord-b', now: 10, requests: [job] }); // coord-b adopted the run and asks again
      assert.equal(await reclaimPlacementRequest(db, { ...job, me: 'coord-a', now: 20 }), 'held', 'the fenced coord-a does not take it');
      assert.deepEqual(await db.selectFrom('placement_requests').select('owner_id').execute(), [{ owner_id: 'coord-b' }], 'the request stays');
      assert.equal(await reclaimPlacementRequest(db, { ...job, me: 'coord-b', now: 30 }), 'taken', 'its owner takes it back');
    }));

  it('withdrawals made together are written together: a whole run, one job, one attempt go; a later attempt and other runs stay', () =>
    withTestDatabase(kind, async ({ db }) => {
      const store = placementStoreOf(db, 'owner', () => 5);
      const request = (runId: string, jobKey: string, attempt = 1) => ({ ...job, runId, jobKey, attempt });
      await store.publish([request('run-a', 'build'), request('run-a', 'test'), request('run-b', 'build'), request('run-b', 'test'), request('run-c', 'build', 2), request('run-d', 'build')]);
      await Promise.all([store.withdraw('run-a'), store.withdraw('run-b', 'test'), store.withdraw('run-c', 'build', 1), store.withdraw('run-missing')]);
      const left = await db.selectFrom('placement_requests').select(['run_id', 'job_key', 'attempt']).orderBy('run_id').orderBy('job_key').execute();
      assert.deepEqual(left, [
        { run_id: 'run-b', job_key: 'build', attempt: 1 },
        { run_id: 'run-c', job_key: 'build', attempt: 2 },
        { run_id: 'run-d', job_key: 'build', attempt: 1 },
      ]);
    }));

  it('many requests are written in one statement: each stored, a job asked for twice keeps its last attempt', () =>
    withTestDatabase(kind, async ({ db }) => {
      const store = placementStoreOf(db, 'owner', () => 5);
      const jobs = Array.from({ length: 300 }, (_, i) => ({ ...job, runId: `run-${i}` }));
      await store.publish([...jobs, { ...job, runId: 'run-7', attempt: 2 }]);
      const rows = await db.selectFrom('placement_requests').select(['run_id', 'attempt', 'owner_id', 'created_at', 'requirements']).execute();
      assert.equal(rows.length, 300);
      assert.equal(rows.find((row) => row.run_id === 'run-7')?.attempt, 2, 'the later attempt of run-7');
      assert.deepEqual(rows.find((row) => row.run_id === 'run-8'), { run_id: 'run-8', attempt: 1, owner_id: 'owner', created_at: 5, requirements: job.requirements });
      await publishPlacementRequests(db, { ownerId: 'owner', now: 9, requests: [{ ...job, runId: 'run-8', attempt: 3 }] });
      assert.equal((await db.selectFrom('placement_requests').select('attempt').where('run_id', '=', 'run-8').executeTakeFirst())?.attempt, 3, 're-offered for a new attempt');
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
