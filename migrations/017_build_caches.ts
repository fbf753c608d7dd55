import { sql } from 'kysely';
import type { Kysely } from 'kysely';

/**
 * Source and dependency caches that build jobs upload (docs/blobs.md#source-and-dependency-caches):
 * one row per repository, trust scope, kind and key (`source`: the workflow's contentHash; `deps`:
 * `<lockfileHash>:<platform>:<arch>`), pointing at its blob.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`CREATE TABLE build_caches (
    repository text NOT NULL,
    scope text NOT NULL,
    kind text NOT NULL,
    cache_key text NOT NULL,
    blob_key text NOT NULL,
    size_bytes bigint NOT NULL,
    sha256 text NOT NULL,
    created_at bigint NOT NULL,
    last_used_at bigint NOT NULL,
    created_by_run text NOT NULL,
    PRIMARY KEY (repository, scope, kind, cache_key)
  )`.execute(db);
  await sql`CREATE INDEX build_caches_used_idx ON build_caches (repository, kind, last_used_at)`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`DROP TABLE build_caches`.execute(db);
}
