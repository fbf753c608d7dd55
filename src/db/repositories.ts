import type { Kysely } from 'kysely';
import type { Schema } from './schema.ts';

export interface RepositoryRegistration {
  name: string;
  provider: 'local' | 'github';
  /** Local provider: the git repository on disk. */
  path: string | null;
  cloneUrl: string | null;
  defaultBranch: string | null;
  /** GitHub provider: the token the Contents API is read with. Never returned by the API. */
  token: string | null;
}

function fromRow(row: Schema['repositories'] extends infer T ? { [K in keyof T]: T[K] } : never): RepositoryRegistration {
  return {
    name: row.name,
    provider: row.provider,
    path: row.path,
    cloneUrl: row.clone_url,
    defaultBranch: row.default_branch,
    token: row.token,
  };
}

export async function getRepository(db: Kysely<Schema>, name: string): Promise<RepositoryRegistration | null> {
  const row = await db.selectFrom('repositories').selectAll().where('name', '=', name).executeTakeFirst();
  return row ? fromRow(row) : null;
}

/** By name; continues after `after` (docs/http-api.md#pagination). */
export async function listRepositories(db: Kysely<Schema>, page: { limit: number; after: string | null } = { limit: 100_000, after: null }): Promise<RepositoryRegistration[]> {
  let query = db.selectFrom('repositories').selectAll().orderBy('name').limit(page.limit);
  if (page.after !== null) query = query.where('name', '>', page.after);
  return (await query.execute()).map(fromRow);
}

export async function upsertRepository(db: Kysely<Schema>, repo: RepositoryRegistration, now: number): Promise<void> {
  const values = {
    name: repo.name,
    provider: repo.provider,
    path: repo.path,
    clone_url: repo.cloneUrl,
    default_branch: repo.defaultBranch,
    token: repo.token,
    created_at: now,
  };
  await db
    .insertInto('repositories')
    .values(values)
    .onConflict((oc) => oc.column('name').doUpdateSet({ ...values, created_at: undefined }))
    .execute();
}

export async function deleteRepository(db: Kysely<Schema>, name: string): Promise<boolean> {
  const result = await db.deleteFrom('repositories').where('name', '=', name).executeTakeFirst();
  return result.numDeletedRows > 0n;
}
