import { createHash } from 'node:crypto';
import { Kysely, PostgresDialect, type CompiledQuery } from 'kysely';
import pg from 'pg';
import type { Logger } from 'pino';
import { startEmbeddedPostgres, type PgConnectionConfig } from './embedded-postgres.ts';
import { migrateToLatest } from './migrate.ts';
import type { Schema } from './schema.ts';

export type DatabaseKind = 'external' | 'embedded';

export interface Database {
  readonly db: Kysely<Schema>;
  readonly kind: DatabaseKind;
  /** How to open a connection of one's own (a LISTEN connection cannot come from the pool). */
  readonly connection: pg.ClientConfig;
  /** Closes the pool and, for the embedded kind, stops the server. */
  close(): Promise<void>;
}

/** Where the database is: an external Postgres, or an embedded one under `dataDir`. */
export interface DatabaseConfig {
  readonly dataDir: string;
  readonly databaseUrl: string | undefined;
  /** Port of the embedded Postgres (`SWITCHYARD_EMBEDDED_PG_PORT`). @default undefined: a free one */
  readonly embeddedPgPort?: number | undefined;
}

/** Name of the database the embedded server keeps Switchyard's tables in. */
export const EMBEDDED_DATABASE_NAME = 'switchyard';

const INT8_OID = 20;

const parseInt8 = (value: string): number => Number(value);

/** Epoch milliseconds, counts and epochs all fit a double; bigint columns come back as numbers. */
const types: pg.CustomTypesConfig = {
  getTypeParser: ((oid: number, format?: 'text' | 'binary'): unknown =>
    oid === INT8_OID && format !== 'binary'
      ? parseInt8
      : (pg.types.getTypeParser(oid, format) as unknown)) as pg.CustomTypesConfig['getTypeParser'],
};

/**
 * Connects to `DATABASE_URL`, or starts the embedded Postgres in `<dataDir>/postgres` when it is
 * unset, then applies all pending migrations before returning.
 */
export async function openDatabase(config: DatabaseConfig, log: Logger): Promise<Database> {
  const started = performance.now();
  const database = config.databaseUrl === undefined
    ? await openEmbedded(config.dataDir, log, config.embeddedPgPort)
    : connectDatabase({ connectionString: config.databaseUrl }, 'external', log);
  try {
    await migrateToLatest(database.db, log);
  } catch (error) {
    await database.close();
    throw error;
  }
  log.info({ kind: database.kind, ms: Math.round(performance.now() - started) }, 'database ready');
  return database;
}

const poolsOf = new WeakMap<Kysely<Schema>, pg.Pool>();

/** Statement names by text: each of the few texts is hashed once, not at every call (a SHA-1 of a commit statement was ~30 µs of loop time). */
const statementNames = new Map<string, string>();
const MAX_STATEMENT_NAMES = 1_000;

/** The name a statement text is prepared under, the same on every connection. */
function statementName(text: string): string {
  let name = statementNames.get(text);
  if (name === undefined) {
    name = `sy_${createHash('sha1').update(text).digest('hex').slice(0, 24)}`;
    if (statementNames.size >= MAX_STATEMENT_NAMES) statementNames.clear();
    statementNames.set(text, name);
  }
  return name;
}

/**
 * Runs a statement as a named prepared statement on the pool behind `db` (each connection parses and
 * plans it once, not at every call); the statement's text names it. Falls back to kysely's way (one
 * unnamed statement) for a `db` this module did not open. For the hot statements only: the group
 * commit, whose texts come in a bounded number of shapes, and a delivery's INSERT and outcome.
 */
export async function executePrepared<R>(db: Kysely<Schema>, query: CompiledQuery): Promise<R[]> {
  const pool = poolsOf.get(db);
  if (!pool) return (await db.executeQuery<R>(query)).rows;
  const name = statementName(query.sql);
  const result = await pool.query<R & pg.QueryResultRow>({ name, text: query.sql, values: [...query.parameters] });
  return result.rows;
}

/** A pooled kysely instance on one Postgres database; `onClose` runs after the pool has ended. */
export function connectDatabase(
  connection: { connectionString: string } | PgConnectionConfig,
  kind: DatabaseKind,
  log: Logger,
  onClose: () => Promise<void> = async () => {},
): Database {
  const pool = new pg.Pool({ ...connection, types, max: 10 });
  let closing: Promise<void> | undefined;
  // An idle client whose server went away must not crash the process; the next query reports it.
  // (The error object holds the whole client, so only its message and code are logged.)
  pool.on('error', (error: Error & { code?: string }) => {
    if (closing === undefined) log.warn({ error: error.message, code: error.code }, 'idle database connection failed');
  });
  // A checked-out client has no pool listener: a connection reset between two queries of a
  // transaction would be an unhandled 'error' and kill the process. Its next query fails instead.
  pool.on('connect', (client) => {
    client.on('error', (error: Error & { code?: string }) => {
      if (closing === undefined) log.warn({ error: error.message, code: error.code }, 'database connection failed while in use');
    });
  });
  const db = new Kysely<Schema>({ dialect: new PostgresDialect({ pool }) });
  poolsOf.set(db, pool);
  return {
    db,
    kind,
    connection: { ...connection, types },
    close: () => (closing ??= db.destroy().then(onClose)),
  };
}

async function openEmbedded(dataDir: string, log: Logger, port: number | undefined): Promise<Database> {
  const started = performance.now();
  const server = await startEmbeddedPostgres(dataDir, log, { port });
  try {
    await server.ensureDatabase(EMBEDDED_DATABASE_NAME);
  } catch (error) {
    await server.stop();
    throw error;
  }
  log.info(
    { port: server.port, initialised: server.initialised, ms: Math.round(performance.now() - started) },
    'embedded postgres started',
  );
  return connectDatabase(server.connection(EMBEDDED_DATABASE_NAME), 'embedded', log, () => server.stop());
}
