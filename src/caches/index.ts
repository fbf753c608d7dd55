import { join } from 'node:path';
import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import type { BlobStore } from '../blobs/blob-store.ts';
import { FileBlobStore } from '../blobs/file-blob-store.ts';
import { PostgresBlobStore } from '../blobs/postgres-blob-store.ts';
import { urlSigningKey, UrlSigner } from '../blobs/signed-urls.ts';
import { Uploads } from '../blobs/uploads.ts';
import type { CompiledConfig } from '../config/index.ts';
import type { Schema } from '../db/schema.ts';
import { coerceError } from '../../lib/errors.ts';
import { Attestations } from './attestations.ts';
import { UserCaches } from './user-cache.ts';
import { BuildCaches } from './build-caches.ts';
import { IdTokens } from './id-tokens.ts';

/** How long an upload or download URL is good for. */
export const URL_TTL_MS = 60 * 60_000;

/** What a coordinator stores for agents: without a master key nothing can be signed, and only the store exists. */
export interface Storage {
  store: BlobStore;
  signer: UrlSigner | null;
  uploads: Uploads | null;
  caches: UserCaches | null;
  attestations: Attestations | null;
  builds: BuildCaches | null;
  /** Job ID tokens (`ctx.kici.oidc.token()`), signed with a key from the master key. */
  idTokens: IdTokens | null;
  /** Expired uploads and the staging they left go (an upload never completed). */
  sweep(): Promise<void>;
  /** Sweeps every `everyMs` until the returned function is called. */
  startSweeping(everyMs: number): () => void;
}

/** The blob store the configuration names: files in `<data dir>/blobs`, or Postgres. */
export function blobStoreFor(config: Pick<CompiledConfig, 'blobStore' | 'dataDir'>, db: Kysely<Schema>, now: () => number): BlobStore {
  return config.blobStore === 'postgres' ? new PostgresBlobStore(db, now) : new FileBlobStore(join(config.dataDir, 'blobs'));
}

/** `baseUrl`: where agents reach this coordinator over HTTP (known once it listens). */
export function createStorage(deps: { config: CompiledConfig; db: Kysely<Schema>; now: () => number; log: Logger; baseUrl: () => string }): Storage {
  const { config, db, now, log } = deps;
  const store = blobStoreFor(config, db, now);
  if (!config.secretKey) {
    log.warn('no master key (SWITCHYARD_SECRET_KEY): caches and provenance are not offered to agents');
    const sweep = async () => void (await store.sweepStaging(now() - 2 * URL_TTL_MS));
    return { store, signer: null, uploads: null, caches: null, attestations: null, builds: null, idTokens: null, sweep, startSweeping: sweeper(sweep, log) };
  }
  const signer = new UrlSigner(urlSigningKey(config.secretKey), deps.baseUrl, now);
  const uploads = new Uploads({ db, store, signer, now, ttlMs: URL_TTL_MS });
  const limits = { quotaBytes: config.cacheQuotaBytes, maxEntryBytes: config.cacheMaxEntryBytes };
  const sweep = async () => {
    await uploads.sweep();
    await store.sweepStaging(now() - 2 * URL_TTL_MS);
  };
  return {
    ...{ store, signer, uploads },
    caches: new UserCaches({ db, uploads, now, limits, log: log.child({ component: 'user-cache' }) }),
    attestations: new Attestations({ db, uploads, now }),
    builds: new BuildCaches({ db, uploads, now, log: log.child({ component: 'build-caches' }) }),
    idTokens: new IdTokens(config.secretKey, { issuer: deps.baseUrl, now, coordinatorId: config.coordinatorId }),
    sweep,
    startSweeping: sweeper(sweep, log),
  };
}

/**
 * Housekeeping of the outside world (upload URLs never used, bytes never completed), not a
 * deadline of any chart: losing a sweep to a restart only delays the next.
 */
function sweeper(sweep: () => Promise<void>, log: Logger): (everyMs: number) => () => void {
  return (everyMs) => {
    const timer = setInterval(() => void sweep().catch((thrown: unknown) => log.warn({ err: coerceError(thrown) }, 'sweeping expired uploads failed')), everyMs);
    timer.unref();
    return () => clearInterval(timer);
  };
}
