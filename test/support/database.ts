import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe } from 'node:test';
import pg from 'pg';
import { Kysely, PostgresDialect, type RawBuilder } from 'kysely';
import { connectDatabase, openDatabase, type Database, type DatabaseKind } from '../../src/db/database.ts';
import { startEmbeddedPostgres, type EmbeddedServer } from '../../src/db/embedded-postgres.ts';
import { migrateToLatest } from '../../src/db/migrate.ts';
import type { Schema } from '../../src/db/schema.ts';
import { createFromTemplate, externalAdminConfig, externalUrl, sharedTestDatabases, skipReason, testDatabaseName, testLog } from './test-databases.ts';

/** Every DB test runs once per kind. */
export const DATABASE_KINDS: readonly DatabaseKind[] = ['external', 'embedded'];

export { externalAdminConfig, externalUrl, skipReason, testLog } from './test-databases.ts';

/** Opens a fresh, migrated, empty database of `kind`, runs `fn`, then drops it. */
export async function withTestDatabase<T>(kind: DatabaseKind, fn: (database: Database) => Promise<T>): Promise<T> {
  const name = testDatabaseName('sy_test');
  const shared = sharedTestDatabases();
  if (kind === 'external') {
    const template = shared?.externalTemplate;
    if (template === undefined) await adminQuery(externalAdminConfig(), `CREATE DATABASE "${name}"`);
    else await createFromTemplate(externalAdminConfig(), name, template);
    return useDatabase(await openDatabase({ databaseUrl: externalUrl(name), dataDir: tmpdir() }, testLog), fn, () =>
      adminQuery(externalAdminConfig(), `DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`),
    );
  }
  if (shared?.embedded !== undefined) {
    const { admin, template } = shared.embedded;
    await createFromTemplate(admin, name, template);
    return useDatabase(connectDatabase({ ...admin, database: name }, 'embedded', testLog), fn, () =>
      adminQuery(admin, `DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`),
    );
  }
  const server = await acquireSharedEmbedded();
  try {
    await server.ensureDatabase(name);
    const database = connectDatabase(server.connection(name), 'embedded', testLog);
    const migrated = async (d: Database): Promise<T> => {
      await migrateToLatest(d.db);
      return fn(d);
    };
    return await useDatabase(database, migrated, () =>
      adminQuery(server.connection('postgres'), `DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`),
    );
  } finally {
    releaseSharedEmbedded();
  }
}

async function useDatabase<T>(database: Database, fn: (database: Database) => Promise<T>, drop: () => Promise<void>): Promise<T> {
  try {
    return await fn(database);
  } finally {
    await database.close();
    await drop();
  }
}

export async function adminQuery(config: pg.ClientConfig, statement: string): Promise<void> {
  const client = new pg.Client(config);
  await client.connect();
  try {
    await client.query(statement);
  } finally {
    await client.end();
  }
}

/**
 * Takes the row locks of `lockingQuery` (a `SELECT ... FOR UPDATE`) in a transaction of its own and
 * holds them until `release()`: a writer that needs those rows waits for as long as a test wants.
 * Resolves once the locks are held; `released` settles when the transaction has ended.
 */
export async function holdRowLocks<DB>(db: Kysely<DB>, lockingQuery: RawBuilder<unknown>): Promise<{ release: () => void; released: Promise<void> }> {
  let release = () => {};
  const held = new Promise<void>((resolve) => (release = resolve));
  let locked = () => {};
  const taken = new Promise<void>((resolve) => (locked = resolve));
  const released = db.transaction().execute(async (trx) => {
    await lockingQuery.execute(trx);
    locked();
    await held;
  });
  await Promise.race([taken, released]);
  return { release, released };
}

/** A temp directory removed when the test file ends. */
export async function tempDir(prefix = 'sy-test-'): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), prefix));
  cleanups.push(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

let sharedDir: Promise<string> | undefined;
let shared: Promise<EmbeddedServer> | undefined;
let stopping: Promise<void> = Promise.resolve();
let openOnShared = 0;
let idleTimer: NodeJS.Timeout | undefined;
const cleanups: (() => Promise<void>)[] = [];

/**
 * One embedded cluster per test file; each test gets its own database on it. The server stops
 * when no test has used it for a moment (a later test restarts it warm, in ~0.1 s): node:test runs
 * root-level `after` hooks only once the event loop is idle, which a live server would prevent.
 */
async function acquireSharedEmbedded(): Promise<EmbeddedServer> {
  openOnShared++;
  clearTimeout(idleTimer);
  await stopping;
  shared ??= (async () => {
    sharedDir ??= tempDir('sy-embedded-');
    return startEmbeddedPostgres(await sharedDir, testLog);
  })();
  return shared;
}

function releaseSharedEmbedded(): void {
  openOnShared--;
  if (openOnShared > 0) return;
  idleTimer = setTimeout(() => {
    const server = shared;
    shared = undefined;
    if (server === undefined) return;
    stopping = server.then((s) => s.stop()).catch((error: unknown) => console.error('stopping the shared embedded Postgres failed', error));
  }, 250);
}

/**
 * `describe(name (kind))` once per database kind, skipped per `skipReason`. Await it at the top
 * level of the test file.
 */
export async function describeEachKind(name: string, body: (kind: DatabaseKind) => void): Promise<void> {
  for (const kind of DATABASE_KINDS) {
    describe(`${name} (${kind})`, { skip: await skipReason(kind) }, () => body(kind));
  }
}

after(async () => {
  clearTimeout(idleTimer);
  const server = shared;
  shared = undefined;
  await stopping;
  if (server !== undefined) await (await server).stop();
  for (const cleanup of cleanups.splice(0)) await cleanup();
});

/** A pool whose first connection has its backend terminated (as `pg_terminate_backend` does) before it is handed out. */
class PoolWhoseFirstConnectionIsCut extends pg.Pool {
  private cut = false;

  constructor(config: pg.PoolConfig) {
    super(config);
    // The cut client can be back in the pool, idle, when its socket's reset arrives: the pool then
    // re-emits the error, and with no listener that was an uncaught exception (a flake seen in CI).
    this.on('error', () => undefined);
  }

  override connect(): Promise<pg.PoolClient>;
  override connect(callback: (err: Error | undefined, client: pg.PoolClient | undefined, done: (release?: unknown) => void) => void): void;
  override connect(callback?: (err: Error | undefined, client: pg.PoolClient | undefined, done: (release?: unknown) => void) => void): Promise<pg.PoolClient> | void {
    if (callback) return super.connect(callback);
    return super.connect().then(async (client) => {
      if (this.cut) return client;
      this.cut = true;
      client.on('error', () => undefined); // the socket's end after the cut, reported once its query has failed
      const { rows } = await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
      const admin = new pg.Client(externalAdminConfig());
      await admin.connect();
      await admin.query('SELECT pg_terminate_backend($1)', [rows[0]?.pid]).finally(() => admin.end());
      return client;
    });
  }
}

/**
 * Runs `fn` on a fresh database of the external Postgres through a pool whose first connection is cut
 * (its backend terminated) before it is handed out: the first statement fails as it does when Postgres
 * restarts, or when an operator terminates the backends. With `migrated`, the schema is there first.
 */
export async function withFirstConnectionCut(options: { migrated: boolean }, fn: (db: Kysely<Schema>) => Promise<void>): Promise<void> {
  const name = testDatabaseName('sy_test');
  await adminQuery(externalAdminConfig(), `CREATE DATABASE "${name}"`);
  try {
    if (options.migrated) {
      const setup = await openDatabase({ databaseUrl: externalUrl(name), dataDir: tmpdir() }, testLog);
      await setup.close();
    }
    const db = new Kysely<Schema>({ dialect: new PostgresDialect({ pool: new PoolWhoseFirstConnectionIsCut({ ...externalAdminConfig(name), max: 2 }) }) });
    try {
      await fn(db);
    } finally {
      await db.destroy();
    }
  } finally {
    await adminQuery(externalAdminConfig(), `DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
  }
}
