import { sql } from 'kysely';
import type { Kysely } from 'kysely';

/**
 * Environments and their holds (docs/database.md#environments):
 * - `environments`: rules a job naming it must pass before its dispatch; `allow_local_execution` is read by test runs;
 * - `environment_repositories` (its bindings: none means every repository) and `environment_variables`;
 * - `approval_gates`: one record per held job, written by the run's effects. `environment` is plain text,
 *   not a foreign key, so deleting an environment nulls it on finished records and they keep their history.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`CREATE TABLE environments (
    name text PRIMARY KEY,
    branches jsonb NOT NULL DEFAULT '[]',
    minimum_trust text NULL CHECK (minimum_trust IN ('trusted', 'known', 'unknown')),
    approval_required boolean NOT NULL DEFAULT false,
    approvers text NULL,
    hold_expiry_seconds integer NOT NULL DEFAULT 86400,
    allow_local_execution boolean NOT NULL DEFAULT false,
    created_at bigint NOT NULL,
    updated_at bigint NOT NULL)`.execute(db);
  await sql`CREATE TABLE environment_repositories (
    environment text NOT NULL REFERENCES environments (name) ON DELETE CASCADE,
    repository text NOT NULL,
    PRIMARY KEY (environment, repository))`.execute(db);
  await sql`CREATE TABLE environment_variables (
    environment text NOT NULL REFERENCES environments (name) ON DELETE CASCADE,
    key text NOT NULL,
    value text NOT NULL,
    updated_at bigint NOT NULL,
    PRIMARY KEY (environment, key))`.execute(db);
  await sql`CREATE TABLE approval_gates (
    run_id text NOT NULL,
    gate_id text NOT NULL,
    job_key text NOT NULL,
    environment text NULL,
    kind text NOT NULL CHECK (kind IN ('approval', 'security')),
    status text NOT NULL CHECK (status IN ('pending', 'approved', 'rejected', 'expired')),
    reason text NOT NULL,
    comment text NULL,
    decided_by text NULL,
    decided_at bigint NULL,
    opened_at bigint NOT NULL,
    expires_at bigint NOT NULL,
    PRIMARY KEY (run_id, gate_id))`.execute(db);
  await sql`CREATE INDEX approval_gates_pending ON approval_gates (environment) WHERE status = 'pending'`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`DROP TABLE approval_gates`.execute(db);
  await sql`DROP TABLE environment_variables`.execute(db);
  await sql`DROP TABLE environment_repositories`.execute(db);
  await sql`DROP TABLE environments`.execute(db);
}
