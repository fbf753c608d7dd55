import { createWriteStream } from 'node:fs';
import { rename, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { ReadableStream as WebReadableStream } from 'node:stream/web';
import { backupDataDir } from '../backup/dump.ts';
import { restoreBackup, RestoreRefusedError } from '../backup/restore.ts';
import { BackupFormatError, readBackup, type BackupCounts } from '../backup/format.ts';
import { loadConfig } from '../config/index.ts';
import { openDatabase } from '../db/database.ts';
import { DataDirInUseError } from '../db/errors.ts';
import { createLogger } from '../log.ts';
import { SECRET_KEY_FILE } from '../secrets/key-file.ts';
import { CliError, CliUsageError, connect, help, parseCommandLine, processIo, runCli, type CliIo } from './client.ts';

const BACKUP_USAGE = `usage: switchyard backup --out FILE [--with-master-key] [--url U]

Writes a backup of the running coordinator: its database (one consistent snapshot, taken while it
runs) and the blob files of its data dir (docs/backups.md). The master key stays out unless
--with-master-key: keep it apart (a password manager, a secrets store); without it the stored
secrets of the backup cannot be opened.
`;

const RESTORE_USAGE = `usage: switchyard restore FILE [--force]

Puts a backup back, with every coordinator stopped, into the database this environment names
(DATABASE_URL, else the embedded one in $SWITCHYARD_DATA_DIR) and the blob files into the data dir.
Refused when the database already holds data (--force replaces it) or is at another schema.
`;

/** `switchyard backup`: 0 written and checked, 1 refused or cut off, 2 bad usage. */
export function runBackupCommand(argv: string[], env: NodeJS.ProcessEnv = process.env, io: CliIo = processIo): Promise<number> {
  return runCli('backup', BACKUP_USAGE, io, async () => {
    const options = { out: { type: 'string' }, 'with-master-key': { type: 'boolean' }, url: { type: 'string' }, help: { type: 'boolean', short: 'h' } } as const;
    const { values, positionals } = parseCommandLine(argv, options);
    if (values.help) return help(io, BACKUP_USAGE);
    if (values.out === undefined || positionals.length > 0) throw new CliUsageError('expected --out FILE and nothing else');
    const api = await connect(env, values.url);
    const response = await api.download(`/api/v1/backup${values['with-master-key'] ? '?withMasterKey=true' : ''}`);
    const partial = `${values.out}.partial`;
    try {
      await pipeline(Readable.fromWeb(response.body as WebReadableStream), createWriteStream(partial, { mode: 0o600 }));
      const counts = await verified(partial);
      await rename(partial, values.out);
      io.stdout.write(`${summary(counts)} written to ${values.out}\n`);
      return 0;
    } catch (thrown) {
      await rm(partial, { force: true });
      if (thrown instanceof BackupFormatError) throw new CliError(`the backup the coordinator sent is not whole (${thrown.message}); nothing was written`);
      throw thrown;
    }
  });
}

/** `switchyard restore`: 0 restored, 1 refused, 2 bad usage. */
export function runRestoreCommand(argv: string[], env: NodeJS.ProcessEnv = process.env, io: CliIo = processIo): Promise<number> {
  return runCli('restore', RESTORE_USAGE, io, async () => {
    const { values, positionals } = parseCommandLine(argv, { force: { type: 'boolean' }, help: { type: 'boolean', short: 'h' } } as const);
    if (values.help) return help(io, RESTORE_USAGE);
    const [file, ...extra] = positionals;
    if (file === undefined || extra.length > 0) throw new CliUsageError('expected exactly one backup FILE');
    const config = loadConfig(env);
    const database = await openDatabase(config, createLogger('warn')).catch((thrown: unknown) => {
      if (thrown instanceof DataDirInUseError) throw new CliError(`the data dir ${config.dataDir} is in use by a running coordinator (pid ${thrown.ownerPid}): stop it first`);
      throw thrown;
    });
    try {
      const dataDir = backupDataDir(config);
      const { header, counts } = await restoreBackup({ db: database.db, dataDir, force: values.force === true }, file);
      io.stdout.write(`restored ${summary(counts)} from ${file} (taken ${new Date(header.createdAt).toISOString()})\n`);
      if (!header.masterKey && dataDir !== null && !(await exists(join(dataDir, SECRET_KEY_FILE))) && env['SWITCHYARD_SECRET_KEY'] === undefined) {
        io.stderr.write(`the backup holds no master key: put the key back as ${join(dataDir, SECRET_KEY_FILE)} or SWITCHYARD_SECRET_KEY before starting, or its secrets cannot be opened\n`);
      }
      return 0;
    } catch (thrown) {
      if (thrown instanceof RestoreRefusedError || thrown instanceof BackupFormatError) throw new CliError(`${thrown.message}; nothing was changed`);
      throw thrown;
    } finally {
      await database.close();
    }
  });
}

async function verified(path: string): Promise<BackupCounts> {
  let counts: BackupCounts | null = null;
  for await (const line of readBackup(path)) if ('end' in line) counts = line.end;
  if (counts === null) throw new BackupFormatError('no end line');
  return counts;
}

function summary(counts: BackupCounts): string {
  const rows = Object.values(counts.rows).reduce((sum, n) => sum + n, 0);
  const runs = counts.rows['runs'] ?? 0;
  return `${runs} runs, ${rows} rows in ${Object.keys(counts.rows).length} tables, ${counts.files} files (${counts.fileBytes} bytes)`;
}

const exists = (path: string) => stat(path).then(() => true, () => false);
