import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { pino, type Logger } from 'pino';
import type { DatabaseKind } from '../../src/db/database.ts';
import type { PgConnectionConfig } from '../../src/db/embedded-postgres.ts';

/**
 * The databases one test run shares: a migrated template on the external Postgres and, on one
 * embedded server the runner starts, another. A test's database is `CREATE DATABASE … TEMPLATE` of
 * its kind's template (a file copy, ~50 ms) instead of a migration or an initdb. `npm test` sets
 * these up (test/run.ts); a file run alone with `node --test` makes its own as before.
 */
export interface SharedTestDatabases {
  /** Tags every database this run makes, so the runner drops what a killed file left behind. */
  readonly runTag: string;
  /** The migrated template on the external Postgres, or undefined when the run has none. */
  readonly externalTemplate: string | undefined;
  /** The run's embedded server, as its admin connection to `postgres`, and the template on it. */
  readonly embedded: { readonly admin: PgConnectionConfig; readonly template: string } | undefined;
}

export const testLog: Logger = pino({ level: process.env.TEST_LOG_LEVEL ?? 'silent' });

/** The Postgres on 127.0.0.1:5432 (PGHOST/PGPORT/PGUSER/PGPASSWORD override), as an admin. */
export function externalAdminConfig(database = 'postgres'): pg.ClientConfig {
  return {
    host: process.env.PGHOST ?? '127.0.0.1',
    port: Number(process.env.PGPORT ?? 5432),
    user: process.env.PGUSER ?? 'postgres',
    password: process.env.PGPASSWORD,
    database,
    connectionTimeoutMillis: 5_000,
  };
}

export function externalUrl(database: string): string {
  const { host, port } = externalAdminConfig(database);
  const user = encodeURIComponent(process.env.PGUSER ?? 'postgres');
  const password = process.env.PGPASSWORD === undefined ? '' : `:${encodeURIComponent(process.env.PGPASSWORD)}`;
  return `postgres://${user}${password}@${host}:${port}/${database}`;
}

/**
 * Why a kind's suite is skipped, or undefined to run it. An unreachable external Postgres skips
 * locally but throws under CI=true, so the file fails instead of passing vacuously.
 */
export async function skipReason(kind: DatabaseKind): Promise<string | undefined> {
  if (kind === 'embedded') return undefined;
  const client = new pg.Client(externalAdminConfig());
  try {
    await client.connect();
    await client.end();
    return undefined;
  } catch (error) {
    const reason = `external Postgres at ${externalUrl('postgres')} is unreachable: ${String(error)}`;
    if (process.env.CI === 'true') throw new Error(`${reason} (CI=true: failing instead of skipping)`, { cause: error });
    return reason;
  }
}

const ENV_KEY = 'SWITCHYARD_TEST_DATABASES';

/** The run's shared databases, from the environment the runner gave this process. */
export function sharedTestDatabases(): SharedTestDatabases | undefined {
  const raw = process.env[ENV_KEY];
  return raw === undefined || raw === '' ? undefined : (JSON.parse(raw) as SharedTestDatabases);
}

/** Puts `shared` in this process's environment, which every test process the runner starts inherits. */
export function publishSharedTestDatabases(shared: SharedTestDatabases): void {
  process.env[ENV_KEY] = JSON.stringify(shared);
}

/** A new database name: `<prefix>_<run tag>_<pid>_<random>`, at most 63 bytes. */
export function testDatabaseName(prefix: string): string {
  const tag = sharedTestDatabases()?.runTag ?? 'solo';
  return `${prefix}_${tag}_${process.pid}_${randomBytes(4).toString('hex')}`;
}

/** Creates `name` as a copy of `template` on the server `admin` reaches. */
export async function createFromTemplate(admin: pg.ClientConfig, name: string, template: string): Promise<void> {
  const client = new pg.Client(admin);
  await client.connect();
  try {
    await client.query(`CREATE DATABASE ${client.escapeIdentifier(name)} TEMPLATE ${client.escapeIdentifier(template)}`);
  } finally {
    await client.end();
  }
}

/** `postgres://` URL of `database` on the server of `admin`. */
export function urlOf(admin: PgConnectionConfig, database: string): string {
  return `postgres://${encodeURIComponent(admin.user)}:${encodeURIComponent(admin.password)}@${admin.host}:${admin.port}/${database}`;
}
