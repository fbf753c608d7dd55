import { sql, type ExpressionBuilder, type Kysely, type RawBuilder } from 'kysely';
import type { PeerLeases } from '../../actors/runs/ownership.ts';
import { LIVENESS_LOCK_CLASS } from './liveness-lock.ts';
import type { Schema } from './schema.ts';
import { TERMINAL_RUN_STATUSES } from './run-status.ts';

/**
 * Whether the coordinator row `c`'s process is gone though its lease has not run out: it names a
 * liveness lock, its renewals are `overdueMs` late, and the lock is free (taken here for the rest of
 * the transaction: a statement on its own lets it go at once). CASE keeps the lock from being tried
 * for any other row.
 */
function processGone(now: number, overdueMs: number): RawBuilder<boolean> {
  return sql<boolean>`CASE WHEN c.lease_until >= ${now} AND c.liveness_key IS NOT NULL AND c.renewed_at < ${now - overdueMs}
    THEN pg_try_advisory_xact_lock(${LIVENESS_LOCK_CLASS}, c.liveness_key) ELSE false END`;
}

/** Whether the coordinator row `c` owns live runs (`o.live` as the predicate, so the partial index run_owner_live_idx serves it). */
function ownsLiveRuns(eb: ExpressionBuilder<Schema & { c: Schema['coordinators'] }, 'c'>) {
  return eb.exists(eb.selectFrom('run_owner as o').select(sql.lit(1).as('one')).whereRef('o.coordinator_id', '=', 'c.id').where(sql<boolean>`o.live`));
}

/**
 * The leases of the coordinators (but `me`) that own live runs: a dead one whose runs all finished
 * has nothing to adopt. A coordinator is dead when its lease ended (`lease_until < now`) or, with
 * `overdueMs`, when its process is gone (`processGone`). With `overdueMs`, a peer whose process is
 * gone while its lease runs is dead too, live runs or not: adopting it ends its lease, so the agent
 * sessions it held and the commands left for it count as dead at once, not when its lease runs out.
 * `nextOverdue` is the first moment after which a peer that names a liveness lock and renewed in
 * time so far would be late; a peer late already, whose lock is held (a frozen process), waits for
 * its lease end.
 */
export async function readPeerLeases(db: Kysely<Schema>, { now, me, overdueMs }: { now: number; me?: string; overdueMs?: number }): Promise<PeerLeases> {
  let query = db
    .selectFrom('coordinators as c')
    .select(['c.id', 'c.epoch', 'c.lease_until', 'c.renewed_at', 'c.liveness_key'])
    .select((eb) => ownsLiveRuns(eb).as('owns_runs'))
    .select(overdueMs === undefined ? sql<boolean>`false`.as('gone') : processGone(now, overdueMs).as('gone'))
    .where((eb) => (overdueMs === undefined ? ownsLiveRuns(eb) : eb.or([ownsLiveRuns(eb), eb.and([eb('c.lease_until', '>=', now), eb('c.liveness_key', 'is not', null)])])))
    .orderBy('c.lease_until');
  if (me !== undefined) query = query.where('c.id', '<>', me);
  const rows = await query.execute();
  const expired: PeerLeases['expired'] = [];
  let nextOverdue: number | null = null;
  for (const { id, epoch, lease_until, gone, renewed_at, liveness_key } of rows) {
    if (lease_until < now) expired.push({ id, epoch, why: 'lease' });
    else if (gone) expired.push({ id, epoch, why: 'process' });
    else if (overdueMs !== undefined && liveness_key !== null && renewed_at !== null && renewed_at + overdueMs >= now) {
      nextOverdue = Math.min(nextOverdue ?? Infinity, renewed_at + overdueMs);
    }
  }
  return { expired, nextEnd: rows.find((row) => row.owns_runs && row.lease_until >= now && !row.gone)?.lease_until ?? null, nextOverdue };
}

/**
 * Takes over every run of a dead coordinator, fencing it first: its epoch is bumped only if it is
 * still `deadEpoch` and still dead (its lease ended, or with `overdueMs` its process is gone, whose
 * lease is then ended too), so of two concurrent adopters exactly one wins and a coordinator that
 * renewed in time keeps its runs. Its live owner rows move to (me, myEpoch); the
 * rows of its finished runs stay, naming it, so a takeover costs the live runs and not the history.
 * The ids returned are those whose snapshot status is not a final run status: the actors to restore.
 * The placement requests it published go: the restored runs ask again for the jobs still waiting,
 * and one left behind would be claimed by a peer for a job placed or ended since, costing a claim, a
 * grant refused and a withdrawal.
 */
export async function adoptRunsOf(
  db: Kysely<Schema>,
  input: { deadId: string; deadEpoch: number; me: string; myEpoch: number; now: number; overdueMs?: number },
): Promise<string[]> {
  const { now, overdueMs } = input;
  return db.transaction().execute(async (trx) => {
    const fenced = await trx
      .updateTable('coordinators as c')
      .set((eb) => ({ epoch: eb('c.epoch', '+', 1), lease_until: sql<number>`LEAST(c.lease_until, ${now - 1})` }))
      .where('c.id', '=', input.deadId)
      .where('c.epoch', '=', input.deadEpoch)
      .where((eb) => (overdueMs === undefined ? eb('c.lease_until', '<', now) : eb.or([eb('c.lease_until', '<', now), processGone(now, overdueMs)])))
      .executeTakeFirst();
    if (fenced.numUpdatedRows === 0n) return [];
    await trx.deleteFrom('placement_requests').where('owner_id', '=', input.deadId).execute();
    const { rows } = await sql<{ run_id: string }>`
      WITH moved AS (
        UPDATE run_owner SET coordinator_id = ${input.me}, epoch = ${input.myEpoch}
         WHERE coordinator_id = ${input.deadId} AND live
        RETURNING run_id)
      SELECT moved.run_id FROM moved LEFT JOIN run_snapshots s USING (run_id)
       WHERE s.status IS NULL OR s.status <> ALL(${TERMINAL_RUN_STATUSES}::text[])
       ORDER BY moved.run_id`.execute(trx);
    return rows.map((row) => row.run_id);
  });
}
