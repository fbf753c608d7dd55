import { sql } from 'kysely';
import type { Kysely } from 'kysely';
import { toJson } from './json.ts';
import type { Schema } from './schema.ts';

/**
 * Runs `change` on a group's stored snapshot while holding the group's row lock, and stores
 * what it returns: one writer per group across every coordinator (CONC-3).
 */
export async function updateConcurrencyGroup<T>(
  db: Kysely<Schema>,
  key: string,
  now: number,
  change: (snapshot: unknown) => { snapshot: unknown; result: T },
): Promise<T> {
  return db.transaction().execute(async (trx) => {
    await sql`INSERT INTO concurrency_groups (key, snapshot, updated_at) VALUES (${key}, 'null', ${now}) ON CONFLICT (key) DO NOTHING`.execute(trx);
    const { rows } = await sql<{ snapshot: unknown }>`SELECT snapshot FROM concurrency_groups WHERE key = ${key} FOR UPDATE`.execute(trx);
    const { snapshot, result } = change(rows[0]?.snapshot ?? null);
    await sql`UPDATE concurrency_groups SET snapshot = ${toJson(snapshot)}::json, updated_at = ${now} WHERE key = ${key}`.execute(trx);
    return result;
  });
}
