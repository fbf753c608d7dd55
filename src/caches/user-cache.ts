import { createHash, randomUUID } from 'node:crypto';
import { sql, type Kysely } from 'kysely';
import type { Logger } from 'pino';
import type { Schema } from '../db/schema.ts';
import type { Uploads } from '../blobs/uploads.ts';

/** The attempt asking, and what the cache needs of its run (frozen at creation, RUN-3). */
export interface CacheCaller {
  runId: string;
  jobKey: string;
  dispatchId: string;
  agentId: string;
  repository: string;
  /** The branch the run is for (a pull request's head branch). */
  ref: string;
  defaultBranch: string;
  /** A fork pull request's run: it reads the trusted entries but writes only where no trusted run reads. */
  untrusted: boolean;
}

export type RestoreAnswer = { hit: false } | { hit: true; matchedKey: string; downloadUrl: string; tarHash: string };
export type SaveAnswer = { skip: true } | { skip: false; uploadUrl: string };
export type SaveOutcome = 'saved' | 'no upload' | 'hash or size mismatch' | 'exists';

export interface UserCacheLimits {
  /** Bytes of entries one repository keeps; the least recently used go first past it. */
  quotaBytes: number;
  /** Bytes of one entry. */
  maxEntryBytes: number;
}

/** Where a run writes its entries, and where it reads them, in order (its own branch, then the default branch's). */
export function scopesOf(caller: Pick<CacheCaller, 'ref' | 'defaultBranch' | 'untrusted'>): { write: string; read: string[] } {
  const write = caller.untrusted ? `untrusted:${caller.ref}` : `branch:${caller.ref}`;
  return { write, read: [...new Set([write, `branch:${caller.defaultBranch}`])] };
}

/**
 * User caches (`ctx.cache`, declarative `cache:`; docs/blobs.md#user-caches): immutable entries by
 * key in a scope. A restore tries the exact key, then each `restoreKeys` prefix in order (the
 * newest entry wins), in the run's own scope before the default branch's. A save is offered an
 * upload URL unless its scope has the key; the completion commits it once its hash and size match
 * what the agent declares, and the repository's oldest-used entries go past its quota.
 */
export class UserCaches {
  constructor(
    private readonly deps: { db: Kysely<Schema>; uploads: Uploads; now: () => number; limits: UserCacheLimits; log: Logger },
  ) {}

  async restore(caller: CacheCaller, key: string, restoreKeys: readonly string[]): Promise<RestoreAnswer> {
    const { read } = scopesOf(caller);
    for (const [index, wanted] of [key, ...restoreKeys].entries()) {
      for (const scope of read) {
        const entry = await this.find(caller.repository, scope, wanted, index > 0);
        if (!entry) continue;
        await this.deps.db.updateTable('user_cache_entries').set({ last_used_at: this.deps.now() }).where('repository', '=', caller.repository).where('scope', '=', scope).where('key', '=', entry.key).execute();
        return { hit: true, matchedKey: entry.key, downloadUrl: this.deps.uploads.downloadUrl(entry.blob_key), tarHash: entry.sha256 };
      }
    }
    return { hit: false };
  }

  private find(repository: string, scope: string, wanted: string, prefix: boolean) {
    const query = this.deps.db.selectFrom('user_cache_entries').select(['key', 'blob_key', 'sha256']).where('repository', '=', repository).where('scope', '=', scope);
    if (!prefix) return query.where('key', '=', wanted).executeTakeFirst();
    return query.where(sql<boolean>`starts_with(key, ${wanted})`).orderBy('created_at', 'desc').orderBy('key', 'desc').limit(1).executeTakeFirst();
  }

  async beginSave(caller: CacheCaller, key: string): Promise<SaveAnswer> {
    const { write } = scopesOf(caller);
    const exists = await this.deps.db.selectFrom('user_cache_entries').select('key').where('repository', '=', caller.repository).where('scope', '=', write).where('key', '=', key).executeTakeFirst();
    if (exists) return { skip: true };
    const uploadUrl = await this.deps.uploads.offer({ purpose: 'user-cache', target: `${write}\n${key}`, maxBytes: this.deps.limits.maxEntryBytes, ...caller });
    return { skip: false, uploadUrl };
  }

  async completeSave(caller: CacheCaller, key: string, tarHash: string, sizeBytes: number): Promise<SaveOutcome> {
    const { write } = scopesOf(caller);
    const upload = await this.deps.uploads.take(caller.dispatchId, 'user-cache', `${write}\n${key}`);
    if (!upload) return 'no upload';
    if (upload.sha256 !== tarHash.toLowerCase() || upload.sizeBytes !== sizeBytes) {
      await this.deps.uploads.store.discard(upload.stagingId);
      this.deps.log.warn({ runId: caller.runId, jobKey: caller.jobKey, key, declared: { tarHash, sizeBytes }, received: { sha256: upload.sha256, sizeBytes: upload.sizeBytes } }, 'user cache upload does not match what the agent declared; dropped');
      return 'hash or size mismatch';
    }
    const blobKey = `caches/${repositoryDir(caller.repository)}/${randomUUID()}`;
    const now = this.deps.now();
    const row = { repository: caller.repository, scope: write, key, blob_key: blobKey, size_bytes: sizeBytes, sha256: upload.sha256, created_at: now, last_used_at: now, created_by_run: caller.runId };
    const kept = await this.deps.uploads.keep(upload, blobKey, async () => (await this.deps.db.insertInto('user_cache_entries').values(row).onConflict((oc) => oc.doNothing()).returning('key').executeTakeFirst()) !== undefined);
    if (!kept) return 'exists';
    await this.evict(caller.repository);
    return 'saved';
  }

  /** Past the repository's quota, its least recently used entries go (the newest is used now, so it stays unless it alone is over). */
  private async evict(repository: string): Promise<void> {
    const total = await this.deps.db.selectFrom('user_cache_entries').select((eb) => eb.fn.sum<string>('size_bytes').as('bytes')).where('repository', '=', repository).executeTakeFirst();
    let over = Number(total?.bytes ?? 0) - this.deps.limits.quotaBytes;
    while (over > 0) {
      const oldest = await this.deps.db.selectFrom('user_cache_entries').select(['scope', 'key', 'blob_key', 'size_bytes']).where('repository', '=', repository).orderBy('last_used_at').orderBy('created_at').limit(1).executeTakeFirst();
      if (!oldest) return;
      await this.deps.db.deleteFrom('user_cache_entries').where('repository', '=', repository).where('scope', '=', oldest.scope).where('key', '=', oldest.key).execute();
      await this.deps.uploads.store.delete(oldest.blob_key);
      this.deps.log.info({ repository, scope: oldest.scope, key: oldest.key, sizeBytes: Number(oldest.size_bytes) }, 'user cache entry evicted (repository over its quota)');
      over -= Number(oldest.size_bytes);
    }
  }
}

/** A directory name for a repository's blobs: a hash, so no name can escape or collide. */
export function repositoryDir(repository: string): string {
  return createHash('sha256').update(repository).digest('hex').slice(0, 24);
}
