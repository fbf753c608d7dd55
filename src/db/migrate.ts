import { sql, type Kysely } from 'kysely';
import { Migrator, type MigrationProvider } from 'kysely';
import type { Logger } from 'pino';
import { MIGRATIONS } from '../../migrations/index.ts';
import { coerceError } from '../../lib/errors.ts';
import { START_RETRY_WAITS_MS, retryingTransient, type OnRetry } from './errors.ts';

const provider: MigrationProvider = { getMigrations: () => Promise.resolve({ ...MIGRATIONS }) };

/**
 * Applies every pending migration in `migrations/` (idempotent; concurrent callers serialise on
 * kysely's migration lock, a Postgres advisory lock, so they run once while the others wait); a
 * database that holds a migration this release does not know is refused first (SchemaNewerError). `openDatabase` calls it; it is exported for tools and tests. Postgres
 * runs them in one transaction, so one cut off by a transient error left nothing and is tried again
 * after each of `retryWaitsMs` (about 16 s in all by default); any other error, or the last, is thrown.
 */
export async function migrateToLatest<DB>(db: Kysely<DB>, log?: Logger, retryWaitsMs: readonly number[] = START_RETRY_WAITS_MS): Promise<string[]> {
  let failedMigration: string | undefined;
  const migrate = async (): Promise<string[]> => {
    await refuseNewerSchema(db);
    const { error, results = [] } = await new Migrator({ db, provider }).migrateToLatest();
    failedMigration = results.find((r) => r.status === 'Error')?.migrationName;
    if (error !== undefined) throw coerceError(error);
    return results.filter((r) => r.status === 'Success').map((r) => r.migrationName);
  };
  const warn: OnRetry = (error, attempt, retryInMs) =>
    log?.warn({ err: coerceError(error), attempt, retryInMs }, 'migrating the database failed for a moment (Postgres unreachable, or the connection cut); retrying');
  try {
    const applied = await retryingTransient(migrate, retryWaitsMs, warn);
    if (applied.length > 0) log?.info({ applied }, 'database migrated');
    return applied;
  } catch (error) {
    if (error instanceof SchemaNewerError) throw error;
    throw migrationError(error, failedMigration);
  }
}

/** The database was migrated by a newer release than this one: starting would run old code on a schema it does not know. */
export class SchemaNewerError extends Error {}

/**
 * Refuses a database that holds migrations this release does not know (a newer release migrated it:
 * a downgrade, or two releases sharing one database during an upgrade), naming both versions.
 */
async function refuseNewerSchema<DB>(db: Kysely<DB>): Promise<void> {
  const table = await sql<{ found: string | null }>`SELECT to_regclass('kysely_migration')::text AS found`.execute(db);
  if (!table.rows[0]?.found) return;
  const applied = await sql<{ name: string }>`SELECT name FROM kysely_migration ORDER BY name`.execute(db);
  const unknown = applied.rows.map((row) => row.name).filter((name) => !Object.hasOwn(MIGRATIONS, name));
  if (unknown.length === 0) return;
  const newest = Object.keys(MIGRATIONS).at(-1) ?? '(none)';
  throw new SchemaNewerError(
    `the database schema is newer than this Switchyard: it has migration ${unknown.at(-1)} (${unknown.length} unknown here), and this release knows up to ${newest}; ` +
      'start the release that migrated it, or restore the database backup taken before the upgrade',
  );
}

function migrationError(error: unknown, migrationName: string | undefined): Error {
  const where = migrationName === undefined ? '' : ` in ${migrationName}`;
  const reason = error instanceof Error ? error.message : JSON.stringify(error);
  return new Error(`Database migration failed${where}: ${reason}`, { cause: error });
}
