import { sql } from 'kysely';
import type { Kysely } from 'kysely';

/**
 * Webhook intake (docs/architecture.md#one-delivery-from-webhook-to-finished-run): every accepted delivery is a row before it is answered;
 * workers claim rows with a lease. Repositories and generic sources are the registrations the
 * pipeline reads lock files and verifies signatures with.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`CREATE TABLE deliveries (
    source text NOT NULL,
    delivery_id text NOT NULL,
    event_name text NOT NULL,
    headers json NOT NULL,
    body bytea NOT NULL,
    received_at bigint NOT NULL,
    status text NOT NULL,
    attempts integer NOT NULL DEFAULT 0,
    next_attempt_at bigint NOT NULL,
    claimed_by text NULL,
    claim_until bigint NULL,
    last_error text NULL,
    outcome json NULL,
    processed_at bigint NULL,
    PRIMARY KEY (source, delivery_id))`.execute(db);
  await sql`CREATE INDEX deliveries_due ON deliveries (next_attempt_at) WHERE status IN ('received', 'retrying', 'processing')`.execute(db);
  await sql`CREATE INDEX deliveries_received_at ON deliveries (received_at)`.execute(db);
  await sql`CREATE TABLE repositories (
    name text PRIMARY KEY,
    provider text NOT NULL CHECK (provider IN ('local', 'github')),
    path text NULL,
    clone_url text NULL,
    default_branch text NULL,
    token text NULL,
    created_at bigint NOT NULL)`.execute(db);
  await sql`CREATE TABLE generic_sources (
    name text PRIMARY KEY,
    verification text NOT NULL CHECK (verification IN ('hmac-sha256', 'api-key', 'none')),
    header text NULL,
    secret text NULL,
    event_type_header text NULL,
    idempotency_header text NULL,
    repository text NOT NULL,
    created_at bigint NOT NULL)`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`DROP TABLE generic_sources`.execute(db);
  await sql`DROP TABLE repositories`.execute(db);
  await sql`DROP TABLE deliveries`.execute(db);
}
