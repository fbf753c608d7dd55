import { createReadStream } from 'node:fs';
import { readdir, stat } from 'node:fs/promises';
import { join, relative } from 'node:path';
import type { Writable } from 'node:stream';
import { sql, type Kysely } from 'kysely';
import type { CompiledConfig } from '../config/index.ts';
import type { Schema } from '../db/schema.ts';
import { SECRET_KEY_FILE } from '../secrets/key-file.ts';
import { BACKUP_FORMAT, BACKUP_KIND, BackupWriter, type BackupCounts, type BackupHeader } from './format.ts';

/** Rows per line of the file, and per FETCH. */
const ROW_BATCH = 500;
/** Bytes of a data dir file per line (before base64). */
const FILE_CHUNK = 256 * 1024;
/** The data dir's folder of the file blob store: blobs, caches and archives. */
export const BLOBS_DIR = 'blobs';

/**
 * The data dir whose files a backup holds, as this configuration uses it: the file blob store's and
 * the embedded default's master key; null with the Postgres blob store and an external database.
 */
export function backupDataDir(config: Pick<CompiledConfig, 'blobStore' | 'databaseUrl' | 'dataDir'>): string | null {
  return config.blobStore === 'files' || config.databaseUrl === undefined ? config.dataDir : null;
}

export interface BackupSource {
  db: Kysely<Schema>;
  /** The data dir whose blob files (and, when asked, master key) go in; null: the database alone. */
  dataDir: string | null;
  withMasterKey: boolean;
  now: () => number;
}

/** Every table Switchyard keeps, the migrator's own aside (their content is the header's `migrations`). */
export async function dataTables(db: Kysely<Schema>): Promise<string[]> {
  const { rows } = await sql<{ name: string }>`
    SELECT table_name AS name FROM information_schema.tables
     WHERE table_schema = current_schema() AND table_type = 'BASE TABLE' AND table_name NOT LIKE 'kysely_migration%'
     ORDER BY table_name`.execute(db);
  return rows.map((row) => row.name);
}

/** A table's columns a row is written with (generated ones are computed again), with their types. */
export async function tableColumns(db: Kysely<Schema>, table: string): Promise<{ name: string; type: string }[]> {
  const { rows } = await sql<{ name: string; type: string }>`
    SELECT a.attname AS name, format_type(a.atttypid, a.atttypmod) AS type FROM pg_attribute a
     WHERE a.attrelid = to_regclass(quote_ident(${table})) AND a.attnum > 0 AND NOT a.attisdropped AND a.attgenerated = ''
     ORDER BY a.attnum`.execute(db);
  return rows;
}

export async function appliedMigrations(db: Kysely<Schema>): Promise<string[]> {
  const { rows } = await sql<{ name: string }>`SELECT name FROM kysely_migration ORDER BY name`.execute(db);
  return rows.map((row) => row.name);
}

/**
 * Writes a backup to `out`: every table as of one moment (a repeatable-read snapshot, taken while
 * the coordinator runs), then the data dir's files. Resolves with what it holds.
 */
export async function writeBackup(source: BackupSource, out: Writable): Promise<BackupCounts> {
  const writer = new BackupWriter(out);
  const counts: BackupCounts = { rows: {}, files: 0, fileBytes: 0 };
  const files = source.dataDir === null ? [] : await dataDirFiles(source.dataDir, source.withMasterKey);
  await source.db
    .transaction()
    .setIsolationLevel('repeatable read')
    .execute(async (trx) => {
      const tables = await dataTables(trx);
      const columns: Record<string, string[]> = {};
      for (const table of tables) columns[table] = (await tableColumns(trx, table)).map((column) => column.name);
      const header: BackupHeader = { kind: BACKUP_KIND, format: BACKUP_FORMAT, createdAt: source.now(), migrations: await appliedMigrations(trx), tables, columns, masterKey: files.includes(SECRET_KEY_FILE) };
      await writer.write({ header });
      for (const table of tables) counts.rows[table] = await dumpTable(trx, table, columns[table] ?? [], writer);
    });
  for (const file of files) {
    counts.files += 1;
    counts.fileBytes += await dumpFile(source.dataDir ?? '', file, writer);
  }
  await writer.write({ end: counts });
  await writer.close();
  return counts;
}

async function dumpTable(trx: Kysely<Schema>, table: string, columns: readonly string[], writer: BackupWriter): Promise<number> {
  const values = sql.join(columns.map((column) => sql`${sql.ref(`t.${column}`)}::text`));
  await sql`DECLARE backup_rows NO SCROLL CURSOR FOR SELECT to_json(ARRAY[${values}]::text[]) AS r FROM ${sql.table(table)} AS t`.execute(trx);
  let count = 0;
  for (;;) {
    const { rows } = await sql<{ r: (string | null)[] }>`FETCH ${sql.raw(String(ROW_BATCH))} FROM backup_rows`.execute(trx);
    if (rows.length === 0) break;
    count += rows.length;
    await writer.write({ table, rows: rows.map((row) => row.r) });
  }
  await sql`CLOSE backup_rows`.execute(trx);
  return count;
}

/** The blob store's files, and the master key when asked; paths relative to the data dir. */
async function dataDirFiles(dataDir: string, withMasterKey: boolean): Promise<string[]> {
  const blobs = join(dataDir, BLOBS_DIR);
  const entries = await readdir(blobs, { recursive: true, withFileTypes: true }).catch((error: NodeJS.ErrnoException) => {
    if (error.code === 'ENOENT') return [];
    throw error;
  });
  const files = entries.filter((entry) => entry.isFile()).map((entry) => relative(dataDir, join(entry.parentPath, entry.name)));
  // A key given as SWITCHYARD_SECRET_KEY has no file: the header says none is included.
  const key = withMasterKey && (await stat(join(dataDir, SECRET_KEY_FILE)).then((s) => s.isFile(), () => false)) ? [SECRET_KEY_FILE] : [];
  return [...key, ...files.sort()];
}

async function dumpFile(dataDir: string, file: string, writer: BackupWriter): Promise<number> {
  let bytes = 0;
  for await (const chunk of createReadStream(join(dataDir, file), { highWaterMark: FILE_CHUNK }) as AsyncIterable<Buffer>) {
    bytes += chunk.length;
    await writer.write({ file, base64: chunk.toString('base64') });
  }
  if (bytes === 0) await writer.write({ file, base64: '' });
  return bytes;
}
