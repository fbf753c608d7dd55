import { sql } from 'kysely';
import type { Kysely } from 'kysely';

/**
 * `job_logs.sent_at`: the agent's timestamp of a `log.chunk`. Chunks arrive in the order the agent
 * sent its batches, which is not the order of their lines (a step's batch may overtake the runner's
 * clone line); the log API orders by this time. Null for chunks stored before it was kept.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER TABLE job_logs ADD COLUMN sent_at bigint NULL`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER TABLE job_logs DROP COLUMN sent_at`.execute(db);
}
