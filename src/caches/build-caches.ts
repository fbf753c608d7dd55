import { randomUUID } from 'node:crypto';
import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import { isBuildJobKey } from '../../machines/run.plan.ts';
import type { Uploads } from '../blobs/uploads.ts';
import type { Schema } from '../db/schema.ts';
import { repositoryDir, type CacheCaller } from './user-cache.ts';

/** A source tarball is the workflow's `.kici/` folder; a dependency tarball its node_modules. */
export const MAX_SOURCE_BYTES = 256 * 1024 * 1024;
export const MAX_DEPS_BYTES = 2 * 1024 * 1024 * 1024;
/** Entries of each kind one repository keeps per scope; the least recently used go past it. */
export const KEPT_PER_KIND = 20;

export type BuildCacheKind = 'source' | 'deps';
type Scope = 'trusted' | 'untrusted';

/** The build job uploading, with what its run's lock file says the tarballs must be. */
export interface BuildCaller extends CacheCaller {
  contentHash: string | null;
  lockfileHash: string | null;
}

export interface BuildUploadRequest {
  cacheType: BuildCacheKind;
  contentHash?: string | undefined;
  lockfileHash?: string | undefined;
  platform: string;
  arch: string;
  depsHash?: string | undefined;
}

/** What a job's dispatch carries so the agent neither clones its workflow source nor installs. */
export interface BuildCacheUrls {
  sourceTarUrl?: string;
  sourceTarHash?: string;
  depsUrl?: string;
  depsHash?: string;
}

/** The keys a run's tarballs are found under, and the scopes it reads, in order. */
export interface BuildCacheQuery {
  repository: string;
  untrusted: boolean;
  contentHash: string | null;
  lockfileHash: string | null;
  platform: string | null;
  arch: string | null;
}

const depsKey = (lockfileHash: string, platform: string, arch: string) => `${lockfileHash}:${platform}:${arch}`;
/** An untrusted run reads the trusted tarballs, and writes only where no trusted run reads (cache poisoning). */
const readScopes = (untrusted: boolean): Scope[] => (untrusted ? ['untrusted', 'trusted'] : ['trusted']);

/**
 * Source and dependency caches (docs/blobs.md#source-and-dependency-caches): the tarballs a run's
 * build job (`__build__<workflow>`) uploads once per workflow contentHash and per dependency
 * lockfileHash, platform and arch, so the jobs of that run and of later runs get `sourceTarUrl`
 * and `depsUrl` instead of cloning and installing. Only a build job uploads, and only for the
 * hashes its own run's lock file names.
 */
export class BuildCaches {
  constructor(private readonly deps: { db: Kysely<Schema>; uploads: Uploads; now: () => number; log: Logger }) {}

  /** Whether the tarball a build would make is there already: the source, or the deps for one platform. */
  async has(query: BuildCacheQuery, kind: BuildCacheKind): Promise<boolean> {
    return (await this.find(query, kind, false)) !== null;
  }

  /** Signed URLs of whatever tarballs a job of this run can use now. */
  async urlsFor(query: BuildCacheQuery): Promise<BuildCacheUrls> {
    const [source, deps] = [await this.find(query, 'source', true), await this.find(query, 'deps', true)];
    return {
      ...(source && { sourceTarUrl: this.deps.uploads.downloadUrl(source.blob_key), sourceTarHash: source.sha256 }),
      ...(deps && { depsUrl: this.deps.uploads.downloadUrl(deps.blob_key), depsHash: deps.sha256 }),
    };
  }

  private async find(query: BuildCacheQuery, kind: BuildCacheKind, touch: boolean) {
    const key = kind === 'source' ? query.contentHash : query.lockfileHash && query.platform && query.arch ? depsKey(query.lockfileHash, query.platform, query.arch) : null;
    if (!key) return null;
    for (const scope of readScopes(query.untrusted)) {
      // One statement a scope: a use marks the entry used as it reads it.
      const row = touch
        ? await this.deps.db.updateTable('build_caches').set({ last_used_at: this.deps.now() }).where('repository', '=', query.repository).where('scope', '=', scope).where('kind', '=', kind).where('cache_key', '=', key).returning(['blob_key', 'sha256']).executeTakeFirst()
        : await this.deps.db.selectFrom('build_caches').select(['blob_key', 'sha256']).where('repository', '=', query.repository).where('scope', '=', scope).where('kind', '=', kind).where('cache_key', '=', key).executeTakeFirst();
      if (row) return row;
    }
    return null;
  }

  /** A signed PUT URL for the tarball a build job is about to upload; or why it may not. */
  async beginUpload(caller: BuildCaller, request: BuildUploadRequest): Promise<{ uploadUrl: string } | { refused: string }> {
    const key = this.keyOf(caller, request);
    if ('refused' in key) return key;
    const maxBytes = request.cacheType === 'source' ? MAX_SOURCE_BYTES : MAX_DEPS_BYTES;
    return { uploadUrl: await this.deps.uploads.offer({ purpose: request.cacheType, target: key.target, maxBytes, ...caller }) };
  }

  /** Commits the uploaded tarball; a deps tarball whose bytes do not hash to the declared `depsHash` is dropped. */
  async completeUpload(caller: BuildCaller, request: BuildUploadRequest): Promise<string> {
    const key = this.keyOf(caller, request);
    if ('refused' in key) return key.refused;
    const upload = await this.deps.uploads.take(caller.dispatchId, request.cacheType, key.target);
    if (!upload) return 'no upload';
    if (request.cacheType === 'deps' && request.depsHash?.toLowerCase() !== upload.sha256) {
      await this.deps.uploads.store.discard(upload.stagingId);
      return 'hash mismatch';
    }
    const blobKey = `builds/${repositoryDir(caller.repository)}/${request.cacheType}/${randomUUID()}`;
    const now = this.deps.now();
    const row = { repository: caller.repository, scope: key.scope, kind: request.cacheType, cache_key: key.cacheKey, blob_key: blobKey, size_bytes: upload.sizeBytes, sha256: upload.sha256, created_at: now, last_used_at: now, created_by_run: caller.runId };
    const kept = await this.deps.uploads.keep(upload, blobKey, async () => (await this.deps.db.insertInto('build_caches').values(row).onConflict((oc) => oc.doNothing()).returning('blob_key').executeTakeFirst()) !== undefined);
    if (!kept) return 'exists';
    await this.evict(caller.repository, key.scope, request.cacheType);
    return 'stored';
  }

  /** Where an upload goes, checked against the run: a build job, for the hashes its own lock file names. */
  private keyOf(caller: BuildCaller, request: BuildUploadRequest): { scope: Scope; cacheKey: string; target: string } | { refused: string } {
    if (!isBuildJobKey(caller.jobKey)) return { refused: `job ${caller.jobKey} is not a build job: only a build job uploads source and dependency caches` };
    const scope: Scope = caller.untrusted ? 'untrusted' : 'trusted';
    if (request.cacheType === 'source') {
      if (!caller.contentHash || request.contentHash !== caller.contentHash) return { refused: `contentHash ${request.contentHash ?? '(none)'} is not the run's workflow contentHash` };
      return { scope, cacheKey: caller.contentHash, target: `${scope}:source:${caller.contentHash}` };
    }
    if (!caller.lockfileHash || request.lockfileHash !== caller.lockfileHash) return { refused: `lockfileHash ${request.lockfileHash ?? '(none)'} is not the run's lock file lockfileHash` };
    const cacheKey = depsKey(caller.lockfileHash, request.platform, request.arch);
    return { scope, cacheKey, target: `${scope}:deps:${cacheKey}` };
  }

  private async evict(repository: string, scope: Scope, kind: BuildCacheKind): Promise<void> {
    const stale = await this.deps.db.selectFrom('build_caches').select(['cache_key', 'blob_key']).where('repository', '=', repository).where('scope', '=', scope).where('kind', '=', kind).orderBy('last_used_at', 'desc').orderBy('created_at', 'desc').offset(KEPT_PER_KIND).limit(1000).execute();
    for (const row of stale) {
      await this.deps.db.deleteFrom('build_caches').where('repository', '=', repository).where('scope', '=', scope).where('kind', '=', kind).where('cache_key', '=', row.cache_key).execute();
      await this.deps.uploads.store.delete(row.blob_key);
      this.deps.log.info({ repository, scope, kind, key: row.cache_key }, 'build cache entry evicted (least recently used)');
    }
  }
}
