import { sql, type Kysely } from 'kysely';
import type { PeerLeases } from '../../actors/runs/ownership.ts';
import type { Schema } from './schema.ts';
import { TERMINAL_RUN_STATUSES } from './run-status.ts';

/**
 * The leases of the coordinators (but `me`) that own live runs: a dead one whose runs all finished
 * has nothing to adopt. A lease ends when `lease_until < now`.
 */
export async function readPeerLeases(db: Kysely<Schema>, { now, me }: { now: number; me?: string }): Promise<PeerLeases> {
  let query = db
    .selectFrom('coordinators as c')
    .select(['c.id', 'c.epoch', 'c.lease_until'])
    .where((eb) =>
      // `o.live` as the index predicate (not `= $1`), so the partial index run_owner_live_idx serves it.
      eb.exists(eb.selectFrom('run_owner as o').select(sql.lit(1).as('one')).whereRef('o.coordinator_id', '=', 'c.id').where(sql<boolean>`o.live`)),
    )
    .orderBy('c.lease_until');
  if (me !== undefined) query = query.where('c.id', '<>', me);
  const rows = await query.execute();
  const expired = rows.filter((row) => row.lease_until < now).map(({ id, epoch }) => ({ id, epoch }));
  return { expired, nextEnd: rows.find((row) => row.lease_until >= now)?.lease_until ?? null };
}

/**
 * Takes over every run of a dead coordinator, fencing it first: its epoch is bumped only if it is
 * still `deadEpoch` and still expired, so of two concurrent adopters exactly one wins and a
 * coordinator that renewed in time keeps its runs. Its live owner rows move to (me, myEpoch); the
 * rows of its finished runs stay, naming it, so a takeover costs the live runs and not the history.
 * The ids returned are those whose snapshot status is not a final run status: the actors to restore.
 * The placement requests it published go: the restored runs ask again for the jobs still waiting,
 * and one left behind would be claimed by a peer for a job placed or ended since, costing a claim, a
 * grant refused and a withdrawal.
 */
export async function adoptRunsOf(
  db: Kysely<Schema>,
  input: { deadId: string; deadEpoch: number; me: string; myEpoch: number; now: number },
): Promise<string[]> {
  return db.transaction().execute(async (trx) => {
    const fenced = await trx
      .updateTable('coordinators')
      .set((eb) => ({ epoch: eb('epoch', '+', 1) }))
      .where('id', '=', input.deadId)
      .where('epoch', '=', input.deadEpoch)
      .where('lease_until', '<', input.now)
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
