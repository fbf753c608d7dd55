import { sql } from 'kysely';
import type { Kysely } from 'kysely';
import { TERMINAL_RUN_STATUSES } from './run-status.ts';
import type { Schema } from './schema.ts';

/**
 * A coordinator restarted under the same id takes back the live runs it owned under an earlier
 * epoch (finished ones keep theirs: a restart costs the live runs, not the history). Its lease
 * claim already bumped the epoch, so the old process (if still alive) is fenced.
 */
export async function reclaimOwnRuns(db: Kysely<Schema>, { me, myEpoch }: { me: string; myEpoch: number }): Promise<string[]> {
  const { rows } = await sql<{ run_id: string }>`
    WITH moved AS (
      UPDATE run_owner SET epoch = ${myEpoch}
       WHERE coordinator_id = ${me} AND epoch < ${myEpoch} AND live
      RETURNING run_id)
    SELECT moved.run_id FROM moved LEFT JOIN run_snapshots s USING (run_id)
     WHERE s.status IS NULL OR s.status <> ALL(${TERMINAL_RUN_STATUSES}::text[])
     ORDER BY moved.run_id`.execute(db);
  return rows.map((row) => row.run_id);
}

/**
 * The live runs this coordinator owns under its current epoch, as the database has them: after an
 * adoption whose answer was lost, the runs it moved here are among them with no actor yet.
 */
export async function ownedLiveRuns(db: Kysely<Schema>, { me, myEpoch }: { me: string; myEpoch: number }): Promise<string[]> {
  const { rows } = await sql<{ run_id: string }>`
    SELECT o.run_id FROM run_owner o LEFT JOIN run_snapshots s USING (run_id)
     WHERE o.coordinator_id = ${me} AND o.epoch = ${myEpoch} AND o.live
       AND (s.status IS NULL OR s.status <> ALL(${TERMINAL_RUN_STATUSES}::text[]))
     ORDER BY o.run_id`.execute(db);
  return rows.map((row) => row.run_id);
}
