import type { Insertable, Kysely } from 'kysely';
import type { GenericSourcesTable, Schema } from './schema.ts';

/** A generic webhook source as registered through the API. */
export type GenericSourceRow = Insertable<GenericSourcesTable>;

export function findGenericSource(db: Kysely<Schema>, name: string) {
  return db.selectFrom('generic_sources').selectAll().where('name', '=', name).executeTakeFirst();
}

/** Sources by name, without their secrets; continues after `after` (docs/http-api.md#pagination). */
export function listGenericSources(db: Kysely<Schema>, page: { limit: number; after: string | null } = { limit: 100_000, after: null }) {
  let query = db
    .selectFrom('generic_sources')
    .select(['name', 'verification', 'header', 'event_type_header', 'idempotency_header', 'repository'])
    .orderBy('name')
    .limit(page.limit);
  if (page.after !== null) query = query.where('name', '>', page.after);
  return query.execute();
}

export async function upsertGenericSource(db: Kysely<Schema>, row: GenericSourceRow): Promise<void> {
  await db.insertInto('generic_sources').values(row).onConflict((oc) => oc.column('name').doUpdateSet({ ...row })).execute();
}

/** The repository whose lock file a generic source's deliveries run (`generic:<name>` or the bare name). */
export async function genericSourceRepository(db: Kysely<Schema>, source: string): Promise<string | null> {
  const row = await db.selectFrom('generic_sources').select('repository').where('name', '=', source.replace(/^generic:/, '')).executeTakeFirst();
  return row?.repository ?? null;
}
