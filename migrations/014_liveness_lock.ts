import { sql } from 'kysely';
import type { Kysely } from 'kysely';

/**
 * A coordinator's process can be seen gone before its lease runs out. `liveness_key` names the
 * session advisory lock it holds for as long as it runs (class LIVENESS_LOCK_CLASS in
 * src/db/liveness-lock.ts), on a connection of its own: a process that dies closes that connection
 * and Postgres frees the lock at once. `renewed_at` is when it last renewed its lease. A peer whose
 * lock is free and whose renewals are overdue is adopted without waiting for its lease's end. A row
 * without a key (a coordinator of an earlier build) is adopted at its lease's end only, as before.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER TABLE coordinators ADD COLUMN liveness_key integer, ADD COLUMN renewed_at bigint`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER TABLE coordinators DROP COLUMN liveness_key, DROP COLUMN renewed_at`.execute(db);
}
