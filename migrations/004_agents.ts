import { sql } from 'kysely';
import type { Kysely } from 'kysely';

/**
 * `agent_tokens`: only the SHA-256 of each token and its display prefix (docs/protocol.md#tokens).
 * `job_logs`: redacted `log.chunk` lines, read back per job and step in arrival order.
 * `agent_sessions`: one row per live agent session, written by the coordinator holding the socket.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`CREATE TABLE agent_tokens (
    id text PRIMARY KEY,
    token_hash text NOT NULL UNIQUE,
    prefix text NOT NULL,
    agent_type text NOT NULL CHECK (agent_type IN ('static', 'ephemeral')),
    labels jsonb NULL,
    mandatory_labels jsonb NOT NULL DEFAULT '[]',
    created_by text NULL,
    created_at bigint NOT NULL,
    expires_at bigint NULL,
    revoked_at bigint NULL,
    consumed_at bigint NULL,
    last_seen_at bigint NULL)`.execute(db);
  await sql`CREATE TABLE job_logs (
    id bigserial PRIMARY KEY,
    run_id text NOT NULL,
    job_key text NOT NULL,
    dispatch_id text NOT NULL,
    step_index integer NOT NULL,
    lines json NOT NULL,
    bytes integer NOT NULL,
    created_at bigint NOT NULL)`.execute(db);
  await sql`CREATE INDEX job_logs_run_job_step_idx ON job_logs (run_id, job_key, step_index, id)`.execute(db);
  await sql`CREATE TABLE agent_sessions (
    agent_id text PRIMARY KEY,
    coordinator_id text NOT NULL,
    connection_id text NOT NULL,
    token_id text NULL,
    labels jsonb NOT NULL,
    max_concurrency integer NOT NULL,
    slots_used integer NOT NULL,
    connected_at bigint NOT NULL,
    last_heartbeat_at bigint NOT NULL)`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`DROP TABLE agent_sessions`.execute(db);
  await sql`DROP TABLE job_logs`.execute(db);
  await sql`DROP TABLE agent_tokens`.execute(db);
}
