import { sql } from 'kysely';
import type { Kysely } from 'kysely';

/**
 * What agents report about a job: its steps (name, status, duration, exit code, error, by index)
 * and, once it ended, its duration and step outputs. Written with the rest of the job projection.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER TABLE jobs ADD COLUMN steps jsonb NOT NULL DEFAULT '[]', ADD COLUMN duration_ms bigint NULL,
    ADD COLUMN outputs jsonb NULL`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER TABLE jobs DROP COLUMN steps, DROP COLUMN duration_ms, DROP COLUMN outputs`.execute(db);
}
