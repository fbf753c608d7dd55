import type { Kysely, Selectable } from 'kysely';
import { REPOSITORIES_CHANGED, notifyEveryCoordinator } from './peer-bus.ts';
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
  /** Repositories (names or `owner/*`) whose workflows' emitted events this one accepts besides its own (docs/events.md). */
  acceptsEventsFrom?: string[];
}

function fromRow(row: Selectable<Schema['repositories']>): RepositoryRegistration {
  return {
    name: row.name,
    provider: row.provider,
    path: row.path,
    cloneUrl: row.clone_url,
    defaultBranch: row.default_branch,
    token: row.token,
    acceptsEventsFrom: row.accepts_events_from,
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

/** Registers (or re-registers) a repository; every coordinator is told when it commits. */
export async function upsertRepository(db: Kysely<Schema>, repo: RepositoryRegistration, now: number): Promise<void> {
  const values = {
    name: repo.name,
    provider: repo.provider,
    path: repo.path,
    clone_url: repo.cloneUrl,
    default_branch: repo.defaultBranch,
    token: repo.token,
    accepts_events_from: JSON.stringify(repo.acceptsEventsFrom ?? []),
    created_at: now,
  };
  await db.transaction().execute(async (tx) => {
    await tx
      .insertInto('repositories')
      .values(values)
      .onConflict((oc) => oc.column('name').doUpdateSet({ ...values, created_at: undefined }))
      .execute();
    await notifyEveryCoordinator(tx, REPOSITORIES_CHANGED);
  });
}

export async function deleteRepository(db: Kysely<Schema>, name: string): Promise<boolean> {
  return db.transaction().execute(async (tx) => {
    const result = await tx.deleteFrom('repositories').where('name', '=', name).executeTakeFirst();
    if (result.numDeletedRows > 0n) await notifyEveryCoordinator(tx, REPOSITORIES_CHANGED);
    return result.numDeletedRows > 0n;
  });
}

/** How long a name found unregistered is answered from memory: runs created through the API for one cost no read each. */
export const UNREGISTERED_KEPT_MS = 1_000;
/** Kept names past which a new one first drops the unregistered names whose time is up. */
const SWEEP_AT = 1_000;

interface CachedRepository {
  reading: Promise<RepositoryRegistration | null>;
  /** Set once the name is found unregistered: the answer is read again after this time. */
  until?: number;
}

/**
 * Registered repositories by name, read once and kept until a registration changes: here (the
 * routes call `invalidate`), a peer's signal (sent in the write's transaction), a reconnect of the
 * listener, or the peers' poll, which bounds how stale a lost signal leaves it. A name not found is
 * kept for `UNREGISTERED_KEPT_MS` only, so a repository registered by other means is seen within it.
 */
export class RepositoryCache {
  private readonly byName = new Map<string, CachedRepository>();

  constructor(
    private readonly db: Kysely<Schema>,
    private readonly now: () => number = Date.now,
  ) {}

  get(name: string): Promise<RepositoryRegistration | null> {
    const cached = this.byName.get(name);
    if (cached && (cached.until === undefined || this.now() < cached.until)) return cached.reading;
    if (this.byName.size >= SWEEP_AT) this.sweepUnregistered();
    const entry: CachedRepository = { reading: getRepository(this.db, name) };
    this.byName.set(name, entry);
    const forget = () => this.byName.get(name) === entry && this.byName.delete(name);
    entry.reading.then((repo) => {
      if (repo === null) entry.until = this.now() + UNREGISTERED_KEPT_MS;
    }, forget);
    return entry.reading;
  }

  invalidate(): void {
    this.byName.clear();
  }

  /** Names found unregistered whose time is up: deliveries naming many unknown repositories leave none behind. */
  private sweepUnregistered(): void {
    const now = this.now();
    for (const [name, entry] of this.byName) if (entry.until !== undefined && entry.until <= now) this.byName.delete(name);
  }
}
