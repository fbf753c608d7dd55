import { spawn, spawnSync } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { startEmbeddedPostgres } from '../../src/db/embedded-postgres.ts';
import { findFreePort } from '../../src/db/free-port.ts';
import type { DatabaseKind } from '../../src/db/database.ts';
import { adminQuery, externalAdminConfig, externalUrl, tempDir, testLog } from './database.ts';
import { eventually } from './runtime.ts';
import { createFromTemplate, sharedTestDatabases, testDatabaseName, urlOf } from './test-databases.ts';

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
 * The external databases made by `sharedDatabaseUrl`, dropped when the test file's process exits.
 * Not before: a test file's cleanups stop its coordinators in orders of their own, and a drop among
 * them could cut one still running. Not at `beforeExit` either: node:test ends the process there,
 * cutting an asynchronous drop short. So a child process drops them, and the exit waits for it.
 */
const externalDatabases: string[] = [];
const DROP_DATABASES = `
const pg = require('pg');
const [config, ...names] = process.argv.slice(1);
(async () => {
  const client = new pg.Client(JSON.parse(config));
  await client.connect();
  for (const name of names) await client.query('DROP DATABASE IF EXISTS "' + name + '" WITH (FORCE)');
  await client.end();
})().catch((error) => { console.error('dropping the test databases ' + names.join(', ') + ' failed: ' + error.message); });`;
process.on('exit', () => {
  if (externalDatabases.length === 0) return;
  spawnSync(process.execPath, ['-e', DROP_DATABASES, JSON.stringify(externalAdminConfig()), ...externalDatabases.splice(0)], { cwd: ROOT, stdio: 'inherit', timeout: 15_000 });
});

/** A database URL other processes can connect to: a fresh, migrated database on the kind's server. */
export async function sharedDatabaseUrl(kind: DatabaseKind): Promise<string> {
  const name = testDatabaseName('sy_e2e');
  const shared = sharedTestDatabases();
  if (kind === 'external') {
    const template = shared?.externalTemplate;
    if (template === undefined) await adminQuery(externalAdminConfig(), `CREATE DATABASE "${name}"`);
    else await createFromTemplate(externalAdminConfig(), name, template);
    externalDatabases.push(name);
    return externalUrl(name);
  }
  if (shared?.embedded !== undefined) {
    const { admin, template } = shared.embedded;
    await createFromTemplate(admin, name, template); // gone with the run's embedded server
    return urlOf(admin, name);
  }
  const server = await startEmbeddedPostgres(await tempDir('sy-e2e-pg-'), testLog);
  after.push(() => server.stop());
  await server.ensureDatabase(name);
  return urlOf(server.connection('postgres'), name);
}

export const after: (() => Promise<void>)[] = [];

/** Starts `switchyard start` as a real child process and waits until it is ready; `ownProcessGroup` makes it a group leader, as in a terminal. */
export async function startCoordinatorProcess(env: Record<string, string>, options: { ownProcessGroup?: boolean } = {}): Promise<CoordinatorProcess> {
  const port = env['PORT'] !== undefined ? Number(env['PORT']) : await findFreePort();
  const child = spawn(process.execPath, ['--no-node-snapshot', '--import', 'tsx', 'src/cli/main.ts', 'start'], {
    cwd: ROOT,
    // As a terminal starts it: the leader of a process group, which a Ctrl-C signals as a whole.
    detached: options.ownProcessGroup === true,
    env: { ...process.env, PORT: String(port), SWITCHYARD_ADMIN_TOKEN: ADMIN_TOKEN, LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  // 'close', not 'exit': by then every line it wrote has been read, so `output()` is complete.
  const exited = new Promise<number | null>((resolve) => child.once('close', (code) => resolve(code)));
  // A test that failed before stopping it: killed with the file's cleanups, or it would keep the file's
  // process alive (its pipes) and go on polling a database dropped under it.
  after.push(() => stopProcess({ child, exited }, 'SIGKILL'));
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

export async function stopProcess(process: Pick<CoordinatorProcess, 'child' | 'exited'>, signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
  if (process.child.exitCode !== null || process.child.signalCode !== null) return;
  process.child.kill(signal);
  await process.exited;
}
