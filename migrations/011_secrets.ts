import { sql } from 'kysely';
import type { Kysely } from 'kysely';

/**
 * Secrets (docs/http-api.md#secrets, docs/database.md):
 * - `secrets`: one value per scope and key, AES-256-GCM under the master key (AAD `scope:key`), with the key's version;
 * - `secret_audit`: who stored, deleted, resolved or revealed which keys (never values);
 * - `run_keys`: the X25519 key pair of a run for secret outputs, the private key sealed under the master key;
 * - `secret_outputs`: the agents' encrypted secret outputs, stored as received;
 * - `test_uploads`: the X25519 key of a test upload, private key sealed, with its expiry;
 * - `test_run_secrets`: a test run's encrypted secrets blob, kept encrypted until dispatch;
 * - `attempt_secrets`: the values sent to one attempt, sealed, so a restarted coordinator still masks its logs.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`CREATE TABLE secrets (
    scope text NOT NULL,
    key text NOT NULL,
    ciphertext text NOT NULL,
    key_version text NOT NULL,
    created_at bigint NOT NULL,
    updated_at bigint NOT NULL,
    PRIMARY KEY (scope, key))`.execute(db);
  await sql`CREATE TABLE secret_audit (
    id bigserial PRIMARY KEY,
    at bigint NOT NULL,
    actor text NOT NULL,
    action text NOT NULL,
    run_id text NULL,
    job_key text NULL,
    dispatch_id text NULL,
    scope text NULL,
    keys jsonb NOT NULL,
    outcome text NOT NULL)`.execute(db);
  await sql`CREATE INDEX secret_audit_run ON secret_audit (run_id, id)`.execute(db);
  await sql`CREATE TABLE run_keys (
    run_id text PRIMARY KEY,
    public_key text NOT NULL,
    private_key text NOT NULL,
    key_version text NOT NULL,
    created_at bigint NOT NULL)`.execute(db);
  await sql`CREATE TABLE secret_outputs (
    run_id text NOT NULL,
    job_key text NOT NULL,
    name text NOT NULL,
    dispatch_id text NOT NULL,
    agent_public_key text NOT NULL,
    encrypted text NOT NULL,
    created_at bigint NOT NULL,
    PRIMARY KEY (run_id, job_key, name))`.execute(db);
  await sql`CREATE TABLE test_uploads (
    upload_id text PRIMARY KEY,
    public_key text NOT NULL,
    private_key text NOT NULL,
    key_version text NOT NULL,
    created_at bigint NOT NULL,
    expires_at bigint NOT NULL)`.execute(db);
  await sql`CREATE TABLE test_run_secrets (
    run_id text PRIMARY KEY,
    upload_id text NOT NULL REFERENCES test_uploads (upload_id),
    sender_public_key text NOT NULL,
    encrypted_secrets text NOT NULL,
    created_at bigint NOT NULL)`.execute(db);
  await sql`CREATE TABLE attempt_secrets (
    dispatch_id text PRIMARY KEY,
    run_id text NOT NULL,
    ciphertext text NOT NULL,
    key_version text NOT NULL,
    created_at bigint NOT NULL)`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  for (const table of ['attempt_secrets', 'test_run_secrets', 'test_uploads', 'secret_outputs', 'run_keys', 'secret_audit', 'secrets']) {
    await sql`DROP TABLE ${sql.table(table)}`.execute(db);
  }
}
