import { it } from 'node:test';
import assert from 'node:assert/strict';
import type { Kysely } from 'kysely';
import { sql } from 'kysely';
import { adoptRunsOf, readPeerLeases } from '../../../src/db/adoption.ts';
import { commitBatch } from '../../../src/db/commit-batch.ts';
import { claimCoordinatorLease, renewCoordinatorLease } from '../../../src/db/coordinator-lease.ts';
import { LIVENESS_LOCK_CLASS, LivenessLock } from '../../../src/db/liveness-lock.ts';
import { liveAgentSession, upsertAgentSession } from '../../../src/db/shared-agents.ts';
import type { Schema } from '../../../src/db/schema.ts';
import { describeEachKind, testLog, withTestDatabase } from '../../support/database.ts';
import { eventually } from '../../support/runtime.ts';
import { entry } from './fixtures.ts';

const TTL_MS = 60_000;
const OVERDUE_MS = 300;

/** Coordinator `id`, renewed at 0 with a long lease, holding `lock` and owning one live run. */
async function coordinatorHolding(db: Kysely<Schema>, id: string, lock: LivenessLock | null, runId: string): Promise<number> {
  const { epoch } = await claimCoordinatorLease(db, { id, ttlMs: TTL_MS, now: 0, livenessKey: lock?.key ?? null });
  await commitBatch(db, { coordinatorId: id, epoch, now: 1, entries: [entry(runId, 1)] });
  return epoch;
}

/** The backend holding the liveness lock `key`, if any. */
async function holderOf(db: Kysely<Schema>, key: number): Promise<number | null> {
  const { rows } = await sql<{ pid: number }>`
    SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted AND classid = ${LIVENESS_LOCK_CLASS} AND objid = ${key} AND objsubid = 2`.execute(db);
  return rows[0]?.pid ?? null;
}

await describeEachKind('liveness lock', (kind) => {
  it('a coordinator whose process is gone is dead before its lease ends, once its renewals are overdue; adopting it ends its lease', () =>
    withTestDatabase(kind, async ({ db, connection }) => {
      const lock = await LivenessLock.take(connection, testLog);
      const epoch = await coordinatorHolding(db, 'a', lock, 'run-1');
      const me = await claimCoordinatorLease(db, { id: 'me', ttlMs: TTL_MS, now: 0, livenessKey: null });
      const scan = (now: number) => readPeerLeases(db, { now, me: 'me', overdueMs: OVERDUE_MS });
      const adopt = (now: number) => adoptRunsOf(db, { deadId: 'a', deadEpoch: epoch, me: 'me', myEpoch: me.epoch, now, overdueMs: OVERDUE_MS });

      assert.deepEqual(await scan(1_000), { expired: [], nextEnd: TTL_MS, nextOverdue: null }, 'overdue, but its lock is held: alive (a frozen process keeps its connection), and left to its lease end');
      assert.deepEqual(await adopt(1_000), [], 'nor can it be adopted');
      await lock.close();
      assert.deepEqual(await scan(OVERDUE_MS - 1), { expired: [], nextEnd: TTL_MS, nextOverdue: OVERDUE_MS }, 'its lock is free, but it renewed in time: alive (a lock connection that failed a moment ago), overdue after its last renewal + OVERDUE_MS');
      assert.deepEqual(await scan(1_000), { expired: [{ id: 'a', epoch, why: 'process' }], nextEnd: null, nextOverdue: null });
      assert.deepEqual((await readPeerLeases(db, { now: 1_000, me: 'me' })).expired, [], 'a scan that does not ask about processes waits for the lease');

      assert.deepEqual(await adopt(1_000), ['run-1']);
      const row = await db.selectFrom('coordinators').select(['epoch', 'lease_until']).where('id', '=', 'a').executeTakeFirstOrThrow();
      assert.deepEqual(row, { epoch: epoch + 1, lease_until: 999 }, 'fenced, and its lease ended for every other reader (agent sessions, commands)');
      assert.equal(await renewCoordinatorLease(db, { id: 'a', epoch, ttlMs: TTL_MS, now: 1_001 }), false, 'the old process, were it alive, is fenced');
    }));

  it('a coordinator whose process is gone is dead though it owns no live run (it held agents); adopting it ends its lease, and its agent sessions with it', () =>
    withTestDatabase(kind, async ({ db, connection }) => {
      const lock = await LivenessLock.take(connection, testLog);
      const { epoch } = await claimCoordinatorLease(db, { id: 'agents-only', ttlMs: TTL_MS, now: 0, livenessKey: lock.key });
      const session = { agentId: 'agent-1', coordinatorId: 'agents-only', connectionId: 'c-1', labels: [], properties: {}, taints: [], maxConcurrency: 1, scalerManaged: false };
      await upsertAgentSession(db, { ...session, tokenId: null, now: 0 });
      await claimCoordinatorLease(db, { id: 'me', ttlMs: TTL_MS, now: 0, livenessKey: null });
      const scan = (now: number) => readPeerLeases(db, { now, me: 'me', overdueMs: OVERDUE_MS });

      assert.deepEqual(await scan(1_000), { expired: [], nextEnd: null, nextOverdue: null }, 'its lock held, it is alive; with no live run, its lease end is not watched');
      await lock.close();
      assert.deepEqual(await scan(OVERDUE_MS - 1), { expired: [], nextEnd: null, nextOverdue: OVERDUE_MS }, 'renewed in time: alive');
      assert.deepEqual(await scan(1_000), { expired: [{ id: 'agents-only', epoch, why: 'process' }], nextEnd: null, nextOverdue: null });
      assert.deepEqual((await readPeerLeases(db, { now: 1_000, me: 'me' })).expired, [], 'a scan that does not ask about processes looks at run owners only');

      assert.ok(await liveAgentSession(db, 'agent-1', 1_000), 'its agent counts as connected until then');
      assert.deepEqual(await adoptRunsOf(db, { deadId: 'agents-only', deadEpoch: epoch, me: 'me', myEpoch: 1, now: 1_000, overdueMs: OVERDUE_MS }), []);
      assert.equal(await liveAgentSession(db, 'agent-1', 1_000), null, 'its agent session is dead at once, not when its lease would have run out');
      assert.deepEqual(await scan(1_001), { expired: [], nextEnd: null, nextOverdue: null }, 'ended, it is not looked at again');
    }));

  it('a coordinator of an earlier build (no lock named) and one that renewed since are not taken for dead', () =>
    withTestDatabase(kind, async ({ db, connection }) => {
      await coordinatorHolding(db, 'old-build', null, 'run-1');
      const lock = await LivenessLock.take(connection, testLog);
      const epoch = await coordinatorHolding(db, 'renewing', lock, 'run-2');
      await lock.close();
      assert.equal(await renewCoordinatorLease(db, { id: 'renewing', epoch, ttlMs: TTL_MS, now: 900 }), true);
      const scan = await readPeerLeases(db, { now: 1_000, me: 'me', overdueMs: OVERDUE_MS });
      assert.deepEqual(scan.expired, []);
      assert.equal(scan.nextOverdue, 900 + OVERDUE_MS, 'the one that renewed is watched from its renewal; the one naming no lock, not at all');
    }));

  it('a lock whose connection is cut while the process lives is taken again under the same key', () =>
    withTestDatabase(kind, async ({ db, connection }) => {
      const lock = await LivenessLock.take(connection, testLog);
      try {
        const first = await holderOf(db, lock.key);
        assert.ok(first !== null, 'held once taken');
        await sql`SELECT pg_terminate_backend(${first})`.execute(db);
        const again = await eventually(async () => {
          const pid = await holderOf(db, lock.key);
          return pid !== null && pid !== first ? pid : null;
        }, 10_000, 'the lock to be taken again on a new connection');
        assert.notEqual(again, first);
      } finally {
        await lock.close();
      }
      assert.equal(await eventually(async () => ((await holderOf(db, lock.key)) === null ? 'free' : null), 5_000, 'the lock to be let go'), 'free');
    }));
});
