import { createReadStream } from 'node:fs';
import { createInterface } from 'node:readline';
import type { Writable } from 'node:stream';
import { createGunzip, createGzip, type Gzip } from 'node:zlib';

/**
 * A Switchyard backup (docs/backups.md): one gzip'd file of JSON lines. The first line is the
 * header; then each table's rows in batches, then the data dir's files in base64 chunks, then an
 * end line with the counts. The end line is how a cut-off file is told from a whole one.
 */
export const BACKUP_KIND = 'switchyard-backup';
export const BACKUP_FORMAT = 1;

export interface BackupHeader {
  kind: typeof BACKUP_KIND;
  format: number;
  createdAt: number;
  /** The schema it was taken at: every applied migration, in order. A restore needs the same. */
  migrations: string[];
  tables: string[];
  /** Each table's columns, in the order of each row's values. */
  columns: Record<string, string[]>;
  /** Whether the master key (`secret-key`) is among its files. */
  masterKey: boolean;
}

export interface BackupCounts {
  rows: Record<string, number>;
  files: number;
  fileBytes: number;
}

export type BackupLine =
  | { header: BackupHeader }
  /** Rows as Postgres writes each value as text (null: SQL NULL), so every type comes back exactly. */
  | { table: string; rows: (string | null)[][] }
  | { file: string; base64: string }
  | { end: BackupCounts };

export class BackupFormatError extends Error {
  override readonly name = 'BackupFormatError';
}

/** Writes lines to a gzip stream piped into `out`, waiting whenever the stream asks to. */
export class BackupWriter {
  private readonly gzip: Gzip = createGzip();
  private readonly done: Promise<void>;

  constructor(out: Writable) {
    this.gzip.pipe(out);
    this.done = new Promise((resolve, reject) => {
      out.once('finish', resolve).once('close', resolve).once('error', reject);
      this.gzip.once('error', reject);
    });
  }

  async write(line: BackupLine): Promise<void> {
    if (!this.gzip.write(`${JSON.stringify(line)}\n`)) await new Promise((resolve) => this.gzip.once('drain', resolve));
  }

  async close(): Promise<void> {
    this.gzip.end();
    await this.done;
  }
}

/** The lines of a backup file, the header checked first; a file without its end line is refused at the end. */
export async function* readBackup(path: string): AsyncGenerator<BackupLine> {
  const lines = createInterface({ input: createReadStream(path).pipe(createGunzip()), crlfDelay: Infinity });
  let first = true;
  let ended = false;
  try {
    for await (const text of lines) {
      if (text === '') continue;
      const line = parseLine(text);
      if (first) checkHeader(line);
      first = false;
      if ('end' in line) ended = true;
      yield line;
    }
  } catch (thrown) {
    if (thrown instanceof BackupFormatError) throw thrown;
    throw new BackupFormatError(`${path} is not a readable Switchyard backup: ${thrown instanceof Error ? thrown.message : String(thrown)}`);
  }
  if (first) throw new BackupFormatError(`${path} is empty`);
  if (!ended) throw new BackupFormatError(`${path} is cut off: it has no end line (the backup did not finish)`);
}

function parseLine(text: string): BackupLine {
  const value: unknown = JSON.parse(text);
  if (typeof value !== 'object' || value === null) throw new BackupFormatError('a line is not a JSON object');
  return value as BackupLine;
}

function checkHeader(line: BackupLine): asserts line is { header: BackupHeader } {
  if (!('header' in line) || line.header.kind !== BACKUP_KIND) throw new BackupFormatError('the first line is not a Switchyard backup header');
  if (line.header.format !== BACKUP_FORMAT) {
    throw new BackupFormatError(`backup format ${String(line.header.format)} is not the one this release reads (${BACKUP_FORMAT})`);
  }
}
