import type { Kysely } from 'kysely';
import { Migrator, type MigrationProvider } from 'kysely';
import type { Logger } from 'pino';
import { MIGRATIONS } from '../../migrations/index.ts';
import { coerceError } from '../../lib/errors.ts';
import { START_RETRY_WAITS_MS, retryingTransient, type OnRetry } from './errors.ts';

const provider: MigrationProvider = { getMigrations: () => Promise.resolve({ ...MIGRATIONS }) };

/**
 * Applies every pending migration in `migrations/` (idempotent; concurrent callers serialise on
 * kysely's migration lock). `openDatabase` calls it; it is exported for tools and tests. Postgres
 * runs them in one transaction, so one cut off by a transient error left nothing and is tried again
 * after each of `retryWaitsMs` (about 16 s in all by default); any other error, or the last, is thrown.
 */
export async function migrateToLatest<DB>(db: Kysely<DB>, log?: Logger, retryWaitsMs: readonly number[] = START_RETRY_WAITS_MS): Promise<string[]> {
  let failedMigration: string | undefined;
  const migrate = async (): Promise<string[]> => {
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
    throw migrationError(error, failedMigration);
  }
}

function migrationError(error: unknown, migrationName: string | undefined): Error {
  const where = migrationName === undefined ? '' : ` in ${migrationName}`;
  const reason = error instanceof Error ? error.message : JSON.stringify(error);
  return new Error(`Database migration failed${where}: ${reason}`, { cause: error });
}
