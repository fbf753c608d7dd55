import { sql } from 'kysely';
import type { Kysely } from 'kysely';

/**
 * `scaler_state`: each coordinator's scaler machine snapshot (its agents and reservations), written
 * before any spawn or destroy it asks for, so a restart or a takeover neither leaks nor double spawns.
 * `installation`: the one id every scaler resource of this database carries as its owner label.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`CREATE TABLE scaler_state (
    coordinator_id text PRIMARY KEY,
    machine_version integer NOT NULL,
    snapshot jsonb NOT NULL,
    updated_at bigint NOT NULL)`.execute(db);
  await sql`CREATE TABLE installation (
    singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    id text NOT NULL,
    created_at bigint NOT NULL)`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`DROP TABLE installation`.execute(db);
  await sql`DROP TABLE scaler_state`.execute(db);
}
