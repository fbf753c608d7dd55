import { sql } from 'kysely';
import type { Kysely } from 'kysely';

/**
 * Journal events and snapshots are written on every accepted event and read back only whole
 * (restore, replay). `json` stores the text as given; `jsonb` would parse and re-encode each
 * one on the hot path for querying we never do.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER TABLE run_events ALTER COLUMN event TYPE json, ALTER COLUMN state_after TYPE json`.execute(db);
  await sql`ALTER TABLE run_snapshots ALTER COLUMN snapshot TYPE json`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER TABLE run_events ALTER COLUMN event TYPE jsonb, ALTER COLUMN state_after TYPE jsonb`.execute(db);
  await sql`ALTER TABLE run_snapshots ALTER COLUMN snapshot TYPE jsonb`.execute(db);
}
