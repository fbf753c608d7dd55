import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { startEmbeddedPostgres } from '../../src/db/embedded-postgres.ts';
import { findFreePort } from '../../src/db/free-port.ts';
import type { DatabaseKind } from '../../src/db/database.ts';
import { adminQuery, externalAdminConfig, externalUrl, tempDir, testLog } from './database.ts';
import { eventually } from './runtime.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
export const ADMIN_TOKEN = `sya_test_${randomBytes(8).toString('hex')}`;

export interface CoordinatorProcess {
  child: ChildProcess;
  url: string;
  output: () => string;
  exited: Promise<number | null>;
  api: (path: string, init?: RequestInit) => Promise<Response>;
}

/**
 * The external databases made by `sharedDatabaseUrl`, dropped once the test file is done: when its
 * event loop is empty, every process it started has exited (a test file's cleanups stop them in
 * orders of their own, so a drop among them could cut a coordinator that is still running).
 */
const externalDatabases: string[] = [];
process.on('beforeExit', () => {
  const names = externalDatabases.splice(0);
  if (names.length === 0) return;
  void Promise.all(names.map((name) => adminQuery(externalAdminConfig(), `DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`))).catch((error: unknown) => {
    process.stderr.write(`dropping the test databases ${names.join(', ')} failed: ${String(error)}\n`);
  });
});

/** A database URL other processes can connect to: a fresh database on the kind's server. */
export async function sharedDatabaseUrl(kind: DatabaseKind): Promise<string> {
  const name = `sy_e2e_${process.pid}_${randomBytes(4).toString('hex')}`;
  if (kind === 'external') {
    await adminQuery(externalAdminConfig(), `CREATE DATABASE "${name}"`);
    externalDatabases.push(name);
    return externalUrl(name);
  }
  const server = await startEmbeddedPostgres(await tempDir('sy-e2e-pg-'), testLog);
  after.push(() => server.stop());
  await server.ensureDatabase(name);
  const c = server.connection(name);
  return `postgres://${encodeURIComponent(c.user)}:${encodeURIComponent(c.password)}@${c.host}:${c.port}/${name}`;
}

export const after: (() => Promise<void>)[] = [];

/** Starts `switchyard start` as a real child process and waits until it is ready. */
export async function startCoordinatorProcess(env: Record<string, string>): Promise<CoordinatorProcess> {
  const port = env['PORT'] !== undefined ? Number(env['PORT']) : await findFreePort();
  const child = spawn(process.execPath, ['--no-node-snapshot', '--import', 'tsx', 'src/cli/main.ts', 'start'], {
    cwd: ROOT,
    env: { ...process.env, PORT: String(port), SWITCHYARD_ADMIN_TOKEN: ADMIN_TOKEN, LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const url = `http://127.0.0.1:${port}`;
  const api = (path: string, init: RequestInit = {}) =>
    fetch(`${url}${path}`, { ...init, headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json', ...init.headers } });
  await eventually(
    async () => (child.exitCode !== null ? Promise.reject(new Error(`coordinator exited early:\n${output}`)) : (await fetch(`${url}/readyz`).catch(() => null))?.ok),
    30_000,
    'the coordinator to become ready',
  ).catch((error: unknown) => {
    child.kill('SIGKILL');
    throw new Error(`${String(error)}\n--- coordinator output ---\n${output.slice(-4000)}`);
  });
  return { child, url, output: () => output, exited, api };
}

export async function stopProcess(process: CoordinatorProcess, signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
  if (process.child.exitCode !== null || process.child.signalCode !== null) return;
  process.child.kill(signal);
  await process.exited;
}
