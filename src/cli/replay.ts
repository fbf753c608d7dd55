import { writeFile } from 'node:fs/promises';
import { parseArgs } from 'node:util';
import { loadConfig } from '../config/index.ts';
import { openDatabase } from '../db/database.ts';
import { blobStoreFor } from '../caches/index.ts';
import { RunArchives } from '../retention/archive.ts';
import { RunHistory } from '../retention/run-history.ts';
import { DataDirInUseError } from '../db/errors.ts';
import { createLogger } from '../log.ts';
import { ArchiveRequestError, coordinatorArchive, databaseArchive } from '../replay/archive.ts';
import type { RunArchive } from '../replay/archive.ts';
import { formatReport } from '../replay/format.ts';
import { readAdminToken } from '../config/admin-token.ts';
import { coordinatorUrl } from '../config/coordinator-target.ts';

const USAGE = `usage: switchyard replay <runId> [options]

Re-runs the run's journal through this build's charts, prints every step (seq, time, event,
state before → after, intents, deadlines armed and disarmed) and checks each recorded state.

options:
  --to <seq>       stop after this seq; the state there is what --export writes
  --json           print the whole replay report as JSON
  --export <file>  write the persisted snapshot at the stop point to <file>
  --force          replay a run recorded by another chart version
  --url <url>      ask a running coordinator (GET /api/v1/runs/:id/replay) instead of the database

Without --url the database is DATABASE_URL, else the embedded one in $SWITCHYARD_DATA_DIR; while a
coordinator runs on that one it is asked instead, found as the other commands find it (SWITCHYARD_URL,
else HOST/PORT). The admin token comes from $SWITCHYARD_ADMIN_TOKEN, else <data dir>/admin-token.

exit status: 0 exact, 1 diverged (or the end state differs), 2 bad usage,
             3 cannot replay (unknown run, other chart version, database busy, coordinator unreachable)
`;

export const EXIT_NOT_EXACT = 1;
export const EXIT_USAGE = 2;
export const EXIT_CANNOT = 3;

export interface CommandIo {
  stdout: Pick<NodeJS.WritableStream, 'write'>;
  stderr: Pick<NodeJS.WritableStream, 'write'>;
}

/** Arguments that cannot work: reported with the usage, exit 2. */
export class CliUsageError extends Error {
  override readonly name = 'CliUsageError';
}

/** Why the command could not do its work, in one line a user can act on: exit 3. */
export class CliFailure extends Error {
  override readonly name = 'CliFailure';
}

async function adminTokenFor(env: NodeJS.ProcessEnv): Promise<string> {
  const found = await readAdminToken(env);
  if (!found.ok) throw new CliFailure(`${found.reason} (needed for --url)`);
  return found.token;
}

export interface OpenedArchive {
  archive: RunArchive;
  close(): Promise<void>;
}

/** The coordinator at `url`, or the database this environment configures. */
export async function openArchive(url: string | undefined, env: NodeJS.ProcessEnv): Promise<OpenedArchive> {
  if (url !== undefined) {
    let base: URL;
    try {
      base = new URL(url);
    } catch (thrown) {
      throw new CliUsageError(`--url is not a URL: "${url}"`, { cause: thrown });
    }
    return { archive: coordinatorArchive(base, await adminTokenFor(env)), close: () => Promise.resolve() };
  }
  const config = loadConfig(env);
  try {
    const database = await openDatabase(config, createLogger('warn'));
    const history = new RunHistory(database.db, new RunArchives(blobStoreFor(config, database.db, Date.now)));
    return { archive: databaseArchive(database.db, history), close: () => database.close() };
  } catch (thrown) {
    if (!(thrown instanceof DataDirInUseError)) throw thrown;
    // The embedded database is the running coordinator's: ask it, found as the other commands find it.
    const found = await readAdminToken(env);
    if (!found.ok) {
      throw new CliFailure(`the embedded database in ${config.dataDir} is held by a running coordinator (pid ${thrown.ownerPid}), and ${found.reason}`, { cause: thrown });
    }
    return { archive: coordinatorArchive(coordinatorUrl(env), found.token), close: () => Promise.resolve() };
  }
}

/** Reports a failure as one line and maps it to an exit status; unknown errors are failures too. */
export function failureExit(thrown: unknown, command: string, usage: string, io: CommandIo): number {
  if (thrown instanceof CliUsageError) {
    io.stderr.write(`switchyard ${command}: ${thrown.message}\n${usage}`);
    return EXIT_USAGE;
  }
  const error = thrown instanceof Error ? thrown : new Error(String(thrown));
  const label = error instanceof CliFailure || error instanceof ArchiveRequestError ? '' : `${error.name}: `;
  io.stderr.write(`switchyard ${command}: ${label}${error.message}\n`);
  return EXIT_CANNOT;
}

function parseArguments(argv: string[]) {
  try {
    return parseArgs({
      args: argv,
      allowPositionals: true,
      strict: true,
      options: {
        to: { type: 'string' },
        json: { type: 'boolean' },
        export: { type: 'string' },
        force: { type: 'boolean' },
        url: { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
    });
  } catch (thrown) {
    throw new CliUsageError(thrown instanceof Error ? thrown.message : String(thrown), { cause: thrown });
  }
}

async function replay(argv: string[], env: NodeJS.ProcessEnv, io: CommandIo): Promise<number> {
  const { values, positionals } = parseArguments(argv);
  if (values.help) {
    io.stdout.write(USAGE);
    return 0;
  }
  const [runId, ...extra] = positionals;
  if (runId === undefined || extra.length > 0) throw new CliUsageError('expected exactly one run id');
  if (values.to !== undefined && !/^\d+$/.test(values.to)) throw new CliUsageError(`--to must be a sequence number, got "${values.to}"`);
  const opened = await openArchive(values.url, env);
  let report;
  try {
    report = await opened.archive.replay(runId, { to: values.to === undefined ? undefined : Number(values.to), force: values.force === true });
  } finally {
    await opened.close();
  }
  io.stdout.write(values.json ? `${JSON.stringify(report, null, 2)}\n` : formatReport(report));
  if (values.export !== undefined) {
    await writeFile(values.export, `${JSON.stringify(report.snapshot, null, 2)}\n`);
    io.stderr.write(`wrote the persisted snapshot at seq ${report.to} to ${values.export}\n`);
  }
  return report.exact ? 0 : EXIT_NOT_EXACT;
}

/** `switchyard replay <runId> [--to N] [--json] [--export F] [--force] [--url U]`. */
export async function runReplayCommand(
  argv: string[],
  env: NodeJS.ProcessEnv = process.env,
  io: CommandIo = { stdout: process.stdout, stderr: process.stderr },
): Promise<number> {
  try {
    return await replay(argv, env, io);
  } catch (thrown) {
    return failureExit(thrown, 'replay', USAGE, io);
  }
}
