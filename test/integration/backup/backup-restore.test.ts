import assert from 'node:assert/strict';
import { createWriteStream } from 'node:fs';
import { mkdir, readFile, truncate, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { it } from 'node:test';
import { sql, type Kysely } from 'kysely';
import { dataTables, writeBackup } from '../../../src/backup/dump.ts';
import { BackupFormatError } from '../../../src/backup/format.ts';
import { restoreBackup, RestoreRefusedError } from '../../../src/backup/restore.ts';
import type { Schema } from '../../../src/db/schema.ts';
import { describeEachKind, tempDir, withTestDatabase } from '../../support/database.ts';

const run = (runId: string, createdAt: number) => ({
  ...{ run_id: runId, workflow_name: 'ci', repository: 'acme/app', status: 'success', created_at: createdAt, updated_at: createdAt },
  ...{ finished_at: createdAt + 5, failure_reason: null, init_failure: null, input_summary: JSON.stringify({ ref: 'refs/heads/main', note: 'ünïcode "quotes" \\ back' }) },
});

/** Rows of several kinds of column: int8, text, jsonb, json (a JSON null kept apart from SQL NULL), bytea, serial ids. */
async function seed(db: Kysely<Schema>, dataDir: string): Promise<void> {
  await db.insertInto('runs').values([run('run-a', 1_000), run('run-b', 2_000)]).execute();
  await sql`INSERT INTO run_events (run_id, seq, event, received_at, state_after) VALUES ('run-a', 0, 'null', 1, '{"run":"done"}'), ('run-a', 1, '{"type":"x"}', 2, 'null')`.execute(db);
  const { id } = await db.insertInto('blobs').values({ key: 'k1', staging_id: null, size_bytes: 3, sha256: 'abc', created_at: 1 }).returning('id').executeTakeFirstOrThrow();
  await db.insertInto('blob_chunks').values({ blob_id: id, seq: 0, data: Buffer.from([0, 255, 10]) }).execute();
  await mkdir(join(dataDir, 'blobs', 'ab'), { recursive: true });
  await writeFile(join(dataDir, 'blobs', 'ab', 'abcdef'), Buffer.alloc(600_000, 7));
  await writeFile(join(dataDir, 'secret-key'), 'k'.repeat(64), { mode: 0o600 });
}

/** Every table's rows as text, in a stable order: what must come back unchanged. */
async function contents(db: Kysely<Schema>): Promise<Record<string, string[]>> {
  const out: Record<string, string[]> = {};
  for (const table of await dataTables(db)) {
    const { rows } = await sql<{ t: string }>`SELECT t::text AS t FROM ${sql.table(table)} AS t ORDER BY 1`.execute(db);
    if (rows.length > 0) out[table] = rows.map((row) => row.t);
  }
  return out;
}

async function backupOf(db: Kysely<Schema>, dataDir: string, withMasterKey: boolean): Promise<string> {
  const path = join(await tempDir('sy-backup-'), 'switchyard.backup');
  await writeBackup({ db, dataDir, withMasterKey, now: () => 42 }, createWriteStream(path));
  return path;
}

await describeEachKind('backup and restore (docs/backups.md)', (kind) => {
  it('a backup restored into an empty database and data dir gives back every row, the blob files and the master key; sequences go on after', async () => {
    await withTestDatabase(kind, async ({ db }) => {
      const dataDir = await tempDir('sy-backup-from-');
      await seed(db, dataDir);
      const path = await backupOf(db, dataDir, true);
      const before = await contents(db);
      const seededIds = (await db.selectFrom('blobs').select('id').execute()).map((row) => row.id);
      await withTestDatabase(kind, async ({ db: empty }) => {
        const restoredDir = await tempDir('sy-backup-to-');
        const { header, counts } = await restoreBackup({ db: empty, dataDir: restoredDir, force: false }, path);
        assert.equal(header.masterKey, true);
        assert.deepEqual([counts.rows['runs'], counts.rows['run_events'], counts.rows['blob_chunks'], counts.files, counts.fileBytes], [2, 2, 1, 2, 600_064]);
        assert.deepEqual(await contents(empty), before);
        assert.deepEqual(await readFile(join(restoredDir, 'blobs', 'ab', 'abcdef')), Buffer.alloc(600_000, 7));
        assert.equal(await readFile(join(restoredDir, 'secret-key'), 'utf8'), 'k'.repeat(64));
        const next = await empty.insertInto('blobs').values({ key: 'k2', staging_id: null, size_bytes: 0, sha256: null, created_at: 2 }).returning('id').executeTakeFirstOrThrow();
        assert.ok(next.id > Math.max(...seededIds), 'the id sequence goes on after the restored ids');
        await empty.insertInto('runs').values(run('run-c', 3_000)).execute();
        assert.equal((await empty.selectFrom('runs').select('number').where('run_id', '=', 'run-c').executeTakeFirstOrThrow()).number, 3, 'run numbers go on too');

        await assert.rejects(restoreBackup({ db: empty, dataDir: restoredDir, force: false }, path), (error: Error) => error instanceof RestoreRefusedError && /already holds data.*--force/.test(error.message));
        await restoreBackup({ db: empty, dataDir: restoredDir, force: true }, path);
        assert.deepEqual(await contents(empty), before, '--force replaces what is there');
      });
    });
  });

  it('without --with-master-key the key stays out; a cut-off file or another schema is refused before anything changes', async () => {
    await withTestDatabase(kind, async ({ db }) => {
      const dataDir = await tempDir('sy-backup-from-');
      await seed(db, dataDir);
      const path = await backupOf(db, dataDir, false);
      await withTestDatabase(kind, async ({ db: empty }) => {
        const restoredDir = await tempDir('sy-backup-to-');
        const { header } = await restoreBackup({ db: empty, dataDir: restoredDir, force: false }, path);
        assert.equal(header.masterKey, false);
        await assert.rejects(readFile(join(restoredDir, 'secret-key')), { code: 'ENOENT' });
        const cut = join(await tempDir('sy-backup-cut-'), 'cut.backup');
        await writeFile(cut, await readFile(path));
        await truncate(cut, Math.floor((await readFile(path)).length / 2));
        await assert.rejects(restoreBackup({ db: empty, dataDir: restoredDir, force: true }, cut), BackupFormatError);
        assert.equal((await empty.selectFrom('runs').select('run_id').execute()).length, 2, 'the failed restore changed nothing');
        await sql`DELETE FROM kysely_migration WHERE name = '020_retention'`.execute(empty);
        await assert.rejects(restoreBackup({ db: empty, dataDir: restoredDir, force: true }, path), /taken at schema 020_retention and this database is at 019_run_numbers: restore it with the release that took it/);
      });
    });
  });
});
