import { sql } from 'kysely';
import type { Kysely } from 'kysely';

/**
 * Agents shared by every coordinator on the database (FO-3):
 * - `agent_sessions` gains what placement and dispatch need of an agent connected elsewhere;
 * - `placement_requests`: jobs no agent of their owner can take, offered to every coordinator's agents;
 *   a coordinator claims one for a while before granting it, so a grant is given once;
 * - `agent_outbox`: frames and slot changes for an agent whose socket another coordinator holds.
 * Rows are signalled with NOTIFY; the tables are the record, the signal only wakes the reader.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER TABLE agent_sessions ADD COLUMN properties jsonb NOT NULL DEFAULT '{}',
    ADD COLUMN taints jsonb NOT NULL DEFAULT '[]', ADD COLUMN scaler_managed boolean NOT NULL DEFAULT false`.execute(db);
  await sql`CREATE INDEX agent_sessions_coordinator ON agent_sessions (coordinator_id)`.execute(db);
  await sql`CREATE TABLE placement_requests (
    run_id text NOT NULL,
    job_key text NOT NULL,
    attempt integer NOT NULL,
    owner_id text NOT NULL,
    requirements jsonb NOT NULL,
    created_at bigint NOT NULL,
    claimed_by text NULL,
    claim_until bigint NULL,
    PRIMARY KEY (run_id, job_key))`.execute(db);
  await sql`CREATE TABLE agent_outbox (
    id bigserial PRIMARY KEY,
    coordinator_id text NOT NULL,
    agent_id text NOT NULL,
    kind text NOT NULL,
    payload jsonb NOT NULL,
    created_at bigint NOT NULL)`.execute(db);
  await sql`CREATE INDEX agent_outbox_coordinator ON agent_outbox (coordinator_id, id)`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`DROP TABLE agent_outbox`.execute(db);
  await sql`DROP TABLE placement_requests`.execute(db);
  await sql`DROP INDEX agent_sessions_coordinator`.execute(db);
  await sql`ALTER TABLE agent_sessions DROP COLUMN properties, DROP COLUMN taints, DROP COLUMN scaler_managed`.execute(db);
}
