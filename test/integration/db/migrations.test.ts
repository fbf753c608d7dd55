import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readdir } from 'node:fs/promises';
import { sql } from 'kysely';
import { MIGRATIONS } from '../../../migrations/index.ts';
import { SchemaNewerError, migrateToLatest } from '../../../src/db/migrate.ts';
import { describeEachKind, skipReason, testLog, withFirstConnectionCut, withTestDatabase } from '../../support/database.ts';
import { TABLES } from './fixtures.ts';

describe('migration list', () => {
  it('names every numbered file in migrations/, in order', async () => {
    const files = (await readdir(new URL('../../../migrations/', import.meta.url)))
      .filter((f) => /^\d{3}_.+\.ts$/.test(f))
      .map((f) => f.replace(/\.ts$/, ''))
      .sort();
    assert.deepEqual(Object.keys(MIGRATIONS), files);
  });
});

await describeEachKind('migrations', (kind) => {
  it('a database a newer release migrated is refused, naming its migration and the newest this release knows', () =>
    withTestDatabase(kind, async ({ db }) => {
      await sql`INSERT INTO kysely_migration (name, timestamp) VALUES ('999_from_a_newer_release', now()::text)`.execute(db);
      const newest = Object.keys(MIGRATIONS).at(-1) ?? '';
      await assert.rejects(migrateToLatest(db, testLog, []), (error: Error) => {
        assert.ok(error instanceof SchemaNewerError, String(error));
        assert.match(error.message, new RegExp(`it has migration 999_from_a_newer_release \\(1 unknown here\\), and this release knows up to ${newest};`));
        return true;
      });
      await sql`DELETE FROM kysely_migration WHERE name = '999_from_a_newer_release'`.execute(db);
      assert.deepEqual(await migrateToLatest(db, testLog, []), [], 'the same database without it starts');
    }));

  it('creates every table with bigint times and json documents (journal and snapshots stored as written, json)', () =>
    withTestDatabase(kind, async ({ db }) => {
      const { rows } = await sql<{ table_name: string; column_name: string; data_type: string }>`
        SELECT table_name, column_name, data_type FROM information_schema.columns
         WHERE table_schema = 'public' AND table_name = ANY(${[...TABLES]}::text[])`.execute(db);
      assert.deepEqual([...new Set(rows.map((r) => r.table_name))].sort(), [...TABLES].sort());
      const type = (table: string, column: string) =>
        rows.find((r) => r.table_name === table && r.column_name === column)?.data_type;
      assert.equal(type('coordinators', 'lease_until'), 'bigint');
      assert.equal(type('run_events', 'received_at'), 'bigint');
      assert.equal(type('run_events', 'event'), 'json');
      assert.equal(type('run_snapshots', 'snapshot'), 'json');
      assert.equal(type('outbox', 'done_at'), 'bigint');
    }));

  it('creates the lookup indexes, with a partial one for pending outbox rows', () =>
    withTestDatabase(kind, async ({ db }) => {
      const { rows } = await sql<{ indexname: string; indexdef: string }>`
        SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'public'`.execute(db);
      const names = rows.map((r) => r.indexname);
      for (const index of ['runs_status_idx', 'jobs_status_idx', 'jobs_dispatch_id_idx', 'timers_due_at_idx']) {
        assert.ok(names.includes(index), `missing ${index}`);
      }
      assert.match(rows.find((r) => r.indexname === 'outbox_pending_idx')?.indexdef ?? '', /WHERE \(done_at IS NULL\)/);
      assert.match(rows.find((r) => r.indexname === 'run_owner_live_idx')?.indexdef ?? '', /\(coordinator_id\) WHERE live/);
      assert.ok(!names.includes('run_owner_coordinator_idx'), 'the index over every run ever owned is gone');
    }));

  it('is idempotent: a second run applies nothing and concurrent runs agree', () =>
    withTestDatabase(kind, async ({ db }) => {
      assert.deepEqual(await migrateToLatest(db), []);
      const results = await Promise.all([migrateToLatest(db), migrateToLatest(db)]);
      assert.deepEqual(results, [[], []]);
    }));
});

describe('a migration cut off by a transient database error', { skip: await skipReason('external') }, () => {
  it('is tried again, and applies every migration (a coordinator starting while Postgres cut its connection exited with 1)', () =>
    withFirstConnectionCut({ migrated: false }, async (db) => {
      assert.deepEqual(await migrateToLatest(db, testLog, [10]), Object.keys(MIGRATIONS));
    }));

  it('fails with the reason once the retries are spent', () =>
    withFirstConnectionCut({ migrated: false }, async (db) => {
      await assert.rejects(migrateToLatest(db, testLog, []), /^Error: Database migration failed: /);
    }));
});
