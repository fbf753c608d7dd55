import { sql } from 'kysely';
import type { Kysely } from 'kysely';

/**
 * Retention (docs/retention.md): an ended run past its window is archived into the blob store and
 * its journal, snapshot and log rows leave the database; `archived_at` says so, and where the run's
 * history is read from. `maintenance_jobs` holds each periodic job's durable schedule and lease, so
 * one coordinator at a time runs it, and a restart neither skips nor repeats it.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER TABLE runs ADD COLUMN archived_at int8`.execute(db);
  await sql`CREATE INDEX runs_to_archive ON runs (finished_at) WHERE archived_at IS NULL AND finished_at IS NOT NULL`.execute(db);
  await sql`CREATE INDEX deliveries_finished ON deliveries (received_at) WHERE status IN ('processed', 'dead')`.execute(db);
  await sql`
    CREATE TABLE maintenance_jobs (
      name text PRIMARY KEY,
      next_run_at int8 NOT NULL,
      holder text,
      lease_until int8,
      last_report jsonb
    )`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`DROP TABLE maintenance_jobs`.execute(db);
  await sql`DROP INDEX deliveries_finished`.execute(db);
  await sql`DROP INDEX runs_to_archive`.execute(db);
  await sql`ALTER TABLE runs DROP COLUMN archived_at`.execute(db);
}
