import { sql } from 'kysely';
import type { Kysely } from 'kysely';

/**
 * A run's owner row says whether the run is still live. The row of a finished run stays (it names
 * the coordinator that finished it) but leaves every set a coordinator walks: restart, adoption and
 * the search for dead coordinators read only live rows, through a partial index, so their cost
 * follows the live runs, not every run ever owned (moving 100,000 finished rows at a takeover took
 * 0.7 s). Rows of runs already finished are marked here, once.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER TABLE run_owner ADD COLUMN live boolean NOT NULL DEFAULT true`.execute(db);
  await sql`UPDATE run_owner o SET live = false FROM run_snapshots s
             WHERE s.run_id = o.run_id AND s.status IN ('success', 'failed', 'cancelled')`.execute(db);
  await sql`CREATE INDEX run_owner_live_idx ON run_owner (coordinator_id) WHERE live`.execute(db);
  await sql`DROP INDEX run_owner_coordinator_idx`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`CREATE INDEX run_owner_coordinator_idx ON run_owner (coordinator_id)`.execute(db);
  await sql`DROP INDEX run_owner_live_idx`.execute(db);
  await sql`ALTER TABLE run_owner DROP COLUMN live`.execute(db);
}
