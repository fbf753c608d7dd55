import type { Kysely } from 'kysely';
import { Migrator, type MigrationProvider } from 'kysely';
import type { Logger } from 'pino';
import { MIGRATIONS } from '../../migrations/index.ts';

const provider: MigrationProvider = { getMigrations: () => Promise.resolve({ ...MIGRATIONS }) };

/**
 * Applies every pending migration in `migrations/` (idempotent; concurrent callers serialise on
 * kysely's migration lock). `openDatabase` calls it; it is exported for tools and tests.
 */
export async function migrateToLatest<DB>(db: Kysely<DB>, log?: Logger): Promise<string[]> {
  const migrator = new Migrator({ db, provider });
  const { error, results = [] } = await migrator.migrateToLatest();
  const applied = results.filter((r) => r.status === 'Success').map((r) => r.migrationName);
  const failed = results.find((r) => r.status === 'Error');
  if (error !== undefined) {
    const where = failed === undefined ? '' : ` in ${failed.migrationName}`;
    const reason = error instanceof Error ? error.message : JSON.stringify(error);
    throw new Error(`Database migration failed${where}: ${reason}`, { cause: error });
  }
  if (applied.length > 0) log?.info({ applied }, 'database migrated');
  return applied;
}
