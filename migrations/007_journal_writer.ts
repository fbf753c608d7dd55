import { sql } from 'kysely';
import type { Kysely } from 'kysely';

/**
 * Who wrote each journal row: the coordinator and the lease epoch it held. Ownership of a run moves
 * in whole periods (adoption fences the old epoch), so along a run's journal the writers form
 * contiguous blocks; a writer that comes back after another one wrote would mean two owners at once.
 * Rows written before this migration have neither.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER TABLE run_events ADD COLUMN written_by text, ADD COLUMN writer_epoch bigint`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER TABLE run_events DROP COLUMN written_by, DROP COLUMN writer_epoch`.execute(db);
}
