import { chmod, mkdir, open, rm, type FileHandle } from 'node:fs/promises';
import { dirname, join, normalize, sep } from 'node:path';
import { sql, type Kysely } from 'kysely';
import { LIVENESS_LOCK_CLASS } from '../db/liveness-lock.ts';
import type { Schema } from '../db/schema.ts';
import { SECRET_KEY_FILE } from '../secrets/key-file.ts';
import { appliedMigrations, BLOBS_DIR, dataTables, tableColumns } from './dump.ts';
import { BackupFormatError, readBackup, type BackupCounts, type BackupHeader } from './format.ts';

export interface RestoreTarget {
  db: Kysely<Schema>;
  /** Where the backup's files go back (the blob store's, the master key); null: they are not restored. */
  dataDir: string | null;
  /** Replace what the database and data dir hold instead of refusing a database that has data. */
  force: boolean;
}

/** Why a restore was refused before anything was changed. */
export class RestoreRefusedError extends Error {
  override readonly name = 'RestoreRefusedError';
}

/**
 * Puts a backup back, all or nothing for the database (one transaction; foreign keys and triggers
 * are off inside it, as the rows are already consistent): its tables replace the database's, its
 * files are written to the data dir, and each sequence continues after its highest id.
 */
export async function restoreBackup(target: RestoreTarget, path: string): Promise<{ header: BackupHeader; counts: BackupCounts }> {
  const lines = readBackup(path);
  const first = await lines.next();
  if (first.done || !('header' in first.value)) throw new BackupFormatError(`${path} has no header`);
  const header = first.value.header;
  const types = await checkTarget(target, header);
  const files = new FileSink(target.dataDir);
  const counts: BackupCounts = { rows: {}, files: 0, fileBytes: 0 };
  let end: BackupCounts | null = null;
  try {
    await target.db.transaction().execute(async (trx) => {
      await sql`SET LOCAL session_replication_role = replica`.execute(trx);
      await sql`TRUNCATE ${sql.join(header.tables.map((table) => sql.table(table)))}`.execute(trx);
      if (target.dataDir !== null && target.force) await rm(join(target.dataDir, BLOBS_DIR), { recursive: true, force: true });
      for await (const line of lines) {
        if ('table' in line) counts.rows[line.table] = (counts.rows[line.table] ?? 0) + (await insertRows(trx, line.table, header.columns[line.table] ?? [], types, line.rows));
        else if ('file' in line) counts.fileBytes += await files.append(line.file, line.base64);
        else if ('end' in line) end = line.end;
      }
      await continueSequences(trx);
    });
  } finally {
    await files.close();
  }
  counts.files = files.count;
  if (end !== null) checkCounts(end, counts);
  return { header, counts };
}

/** Refuses a restore that cannot be right: another schema, a running coordinator, data it would replace unasked. */
async function checkTarget(target: RestoreTarget, header: BackupHeader): Promise<Map<string, string>> {
  const migrations = await appliedMigrations(target.db);
  if (migrations.join() !== header.migrations.join()) {
    throw new RestoreRefusedError(
      `the backup was taken at schema ${header.migrations.at(-1) ?? 'none'} and this database is at ${migrations.at(-1) ?? 'none'}: restore it with the release that took it, then start this one to upgrade`,
    );
  }
  const { rows: live } = await sql<{ n: number }>`SELECT count(*)::int AS n FROM pg_locks
     WHERE locktype = 'advisory' AND classid = ${LIVENESS_LOCK_CLASS} AND granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`.execute(target.db);
  if ((live[0]?.n ?? 0) > 0) throw new RestoreRefusedError('a coordinator is running on this database: stop every coordinator first');
  const tables = new Set(await dataTables(target.db));
  const unknown = header.tables.filter((table) => !tables.has(table));
  if (unknown.length > 0) throw new RestoreRefusedError(`the database has no table ${unknown.join(', ')}`);
  const types = new Map<string, string>();
  for (const table of header.tables) {
    const columns = await tableColumns(target.db, table);
    if (columns.map((c) => c.name).join() !== (header.columns[table] ?? []).join()) throw new RestoreRefusedError(`table ${table} has other columns here than in the backup`);
    for (const column of columns) types.set(`${table}.${column.name}`, column.type);
  }
  if (!target.force && (await holdsData(target.db, header.tables))) {
    throw new RestoreRefusedError('the database already holds data: restore into an empty one, or pass --force to replace it');
  }
  return types;
}

async function holdsData(db: Kysely<Schema>, tables: readonly string[]): Promise<boolean> {
  for (const table of tables) {
    const { rows } = await sql<{ found: boolean }>`SELECT EXISTS (SELECT 1 FROM ${sql.table(table)}) AS found`.execute(db);
    if (rows[0]?.found) return true;
  }
  return false;
}

/** Each value is cast back from the text Postgres wrote, to the column's own type. */
async function insertRows(trx: Kysely<Schema>, table: string, columns: readonly string[], types: Map<string, string>, rows: (string | null)[][]): Promise<number> {
  if (rows.length === 0) return 0;
  const casts = columns.map((column, i) => sql`(r ->> ${sql.raw(String(i))})::${sql.raw(types.get(`${table}.${column}`) ?? 'text')}`);
  await sql`
    INSERT INTO ${sql.table(table)} (${sql.join(columns.map((column) => sql.ref(column)))}) OVERRIDING SYSTEM VALUE
    SELECT ${sql.join(casts)} FROM json_array_elements(${JSON.stringify(rows)}::json) AS r`.execute(trx);
  return rows.length;
}

/** Every serial or identity column's sequence goes on after the highest value restored. */
async function continueSequences(trx: Kysely<Schema>): Promise<void> {
  const { rows } = await sql<{ tbl: string; col: string; seq: string }>`
    SELECT c.table_name AS tbl, c.column_name AS col, pg_get_serial_sequence(quote_ident(c.table_name), c.column_name) AS seq
      FROM information_schema.columns c
     WHERE c.table_schema = current_schema() AND pg_get_serial_sequence(quote_ident(c.table_name), c.column_name) IS NOT NULL`.execute(trx);
  for (const { tbl, col, seq } of rows) {
    await sql`SELECT setval(${seq}, coalesce((SELECT max(${sql.ref(col)}) FROM ${sql.table(tbl)}), 0) + 1, false)`.execute(trx);
  }
}

function checkCounts(expected: BackupCounts, restored: BackupCounts): void {
  const differing = Object.entries(expected.rows).filter(([table, n]) => (restored.rows[table] ?? 0) !== n);
  if (differing.length > 0 || expected.fileBytes !== restored.fileBytes) {
    throw new BackupFormatError(`the backup's end line does not match what it held (${differing.map(([t]) => t).join(', ') || 'files'})`);
  }
}

/** The backup's files, written back one after the other; a path that leaves the data dir is refused. */
class FileSink {
  count = 0;
  private current: { file: string; handle: FileHandle } | null = null;

  constructor(private readonly dataDir: string | null) {}

  async append(file: string, base64: string): Promise<number> {
    if (this.dataDir === null) return Buffer.byteLength(base64, 'base64');
    const path = normalize(join(this.dataDir, file));
    if (!path.startsWith(`${normalize(this.dataDir)}${sep}`) || !(file === SECRET_KEY_FILE || file.startsWith(`${BLOBS_DIR}/`))) {
      throw new BackupFormatError(`the backup names a file outside the blob store and the master key: ${file}`);
    }
    if (this.current?.file !== file) {
      await this.close();
      await mkdir(dirname(path), { recursive: true });
      this.current = { file, handle: await open(path, 'w', 0o600) };
      this.count += 1;
      if (file === SECRET_KEY_FILE) await chmod(path, 0o600);
    }
    const bytes = Buffer.from(base64, 'base64');
    await this.current.handle.write(bytes);
    return bytes.length;
  }

  async close(): Promise<void> {
    await this.current?.handle.close();
    this.current = null;
  }
}
