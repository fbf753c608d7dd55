import { sql } from 'kysely';
import type { Kysely } from 'kysely';

/**
 * Blobs and what refers to them (DESIGN.md §7, docs/blobs.md): the Postgres blob store's objects
 * (`blobs`, bytes in 1 MiB `blob_chunks`); the upload URLs handed to agents (`blob_uploads`: what
 * each may write, for which attempt, until when, and what was written); user cache entries; and
 * provenance attestations. An upload is visible only through the row that commits it.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`CREATE TABLE blobs (
    id bigserial PRIMARY KEY,
    key text UNIQUE,
    staging_id uuid UNIQUE,
    size_bytes bigint NOT NULL,
    sha256 text,
    created_at bigint NOT NULL,
    CHECK ((key IS NULL) <> (staging_id IS NULL))
  )`.execute(db);
  await sql`CREATE TABLE blob_chunks (
    blob_id bigint NOT NULL REFERENCES blobs(id) ON DELETE CASCADE,
    seq integer NOT NULL,
    data bytea NOT NULL,
    PRIMARY KEY (blob_id, seq)
  )`.execute(db);
  await sql`CREATE TABLE blob_uploads (
    upload_id uuid PRIMARY KEY,
    purpose text NOT NULL,
    repository text NOT NULL,
    target text NOT NULL,
    run_id text NOT NULL,
    job_key text NOT NULL,
    dispatch_id text NOT NULL,
    agent_id text NOT NULL,
    max_bytes bigint NOT NULL,
    expires_at bigint NOT NULL,
    staging_id uuid,
    size_bytes bigint,
    sha256 text,
    uploaded_at bigint,
    created_at bigint NOT NULL
  )`.execute(db);
  await sql`CREATE INDEX blob_uploads_expires_idx ON blob_uploads (expires_at)`.execute(db);
  await referringTables(db);
}

/** The rows that make uploads visible: user cache entries and provenance attestations. */
async function referringTables(db: Kysely<unknown>): Promise<void> {
  await sql`CREATE TABLE user_cache_entries (
    repository text NOT NULL,
    scope text NOT NULL,
    key text NOT NULL,
    blob_key text NOT NULL,
    size_bytes bigint NOT NULL,
    sha256 text NOT NULL,
    created_at bigint NOT NULL,
    last_used_at bigint NOT NULL,
    created_by_run text NOT NULL,
    PRIMARY KEY (repository, scope, key)
  )`.execute(db);
  await sql`CREATE INDEX user_cache_entries_used_idx ON user_cache_entries (repository, last_used_at)`.execute(db);
  await sql`CREATE TABLE attestations (
    id bigserial PRIMARY KEY,
    run_id text NOT NULL,
    job_key text NOT NULL,
    subject_name text NOT NULL,
    subject_digest text NOT NULL,
    media_type text NOT NULL,
    blob_key text NOT NULL,
    size_bytes bigint NOT NULL,
    sha256 text NOT NULL,
    created_at bigint NOT NULL
  )`.execute(db);
  await sql`CREATE INDEX attestations_run_idx ON attestations (run_id)`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  for (const table of ['attestations', 'user_cache_entries', 'blob_uploads', 'blob_chunks', 'blobs']) await sql`DROP TABLE ${sql.table(table)}`.execute(db);
}
