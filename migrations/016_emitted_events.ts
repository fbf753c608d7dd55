import { sql } from 'kysely';
import type { Kysely } from 'kysely';

/**
 * Events workflows emit (`ctx.emit`, docs/events.md): one row per emitted event, naming the run and
 * job that sent it and the repositories it was delivered to (one delivery each, source `event`), so
 * the sending run links to the runs it started; and, per repository, the repositories whose events
 * it accepts besides its own (`accepts_events_from`, names or `owner/*`).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`CREATE TABLE emitted_events (
    event_id uuid PRIMARY KEY,
    run_id text NOT NULL,
    job_key text NOT NULL,
    repository text NOT NULL,
    event_name text NOT NULL,
    targets jsonb NOT NULL,
    created_at bigint NOT NULL
  )`.execute(db);
  await sql`CREATE INDEX emitted_events_run_idx ON emitted_events (run_id)`.execute(db);
  await sql`ALTER TABLE repositories ADD COLUMN accepts_events_from jsonb NOT NULL DEFAULT '[]'::jsonb`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER TABLE repositories DROP COLUMN accepts_events_from`.execute(db);
  await sql`DROP TABLE emitted_events`.execute(db);
}
