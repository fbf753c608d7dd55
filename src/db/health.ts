import { sql } from 'kysely';
import type { Kysely } from 'kysely';
import type { Schema } from './schema.ts';

/** Whether the database answers and has its migrations applied; each false says which check failed. */
export async function databaseHealth(db: Kysely<Schema>): Promise<{ database: boolean; migrations: boolean }> {
  const checks = { database: false, migrations: false };
  try {
    await sql`select 1`.execute(db);
    checks.database = true;
    const applied = await sql<{ n: number }>`select count(*)::int as n from kysely_migration`.execute(db);
    checks.migrations = (applied.rows[0]?.n ?? 0) > 0;
  } catch {
    // the checks stay false: the caller reports which one failed
  }
  return checks;
}
