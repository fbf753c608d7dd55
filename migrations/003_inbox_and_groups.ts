import { sql } from 'kysely';
import type { Kysely } from 'kysely';

/**
 * `run_inbox`: events for a run owned by another coordinator (API cancel, concurrency grants);
 * the owner takes them in id order. `concurrency_groups`: one arbiter snapshot per group key,
 * changed only inside a transaction holding its row lock (CONC-3).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`CREATE TABLE run_inbox (
    id bigserial PRIMARY KEY,
    run_id text NOT NULL,
    event json NOT NULL,
    created_at bigint NOT NULL)`.execute(db);
  await sql`CREATE INDEX run_inbox_run_id ON run_inbox (run_id)`.execute(db);
  await sql`CREATE TABLE concurrency_groups (
    key text PRIMARY KEY,
    snapshot json NOT NULL,
    updated_at bigint NOT NULL)`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`DROP TABLE concurrency_groups`.execute(db);
  await sql`DROP TABLE run_inbox`.execute(db);
}
