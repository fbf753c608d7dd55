import type { Readable } from 'node:stream';

/**
 * Everything larger than a row (cache tarballs, provenance bundles) goes through this port
 * (DESIGN.md §7). Bytes arrive in a staging object nobody can read; `commit` makes them visible
 * under a key, after the caller checked their size and hash. Two adapters: files in the data
 * directory (the embedded default), and Postgres, chunked, which every coordinator shares.
 */
export interface BlobStore {
  readonly kind: 'files' | 'postgres';
  /** Streams `body` into a new staging object: its id, size and SHA-256. Past `maxBytes` it throws BlobTooLargeError and keeps nothing. */
  stage(body: Readable, maxBytes: number): Promise<StagedBlob>;
  /** Makes a staged object readable under `key` (replacing what was there); false when the staging id is unknown (taken already, or discarded). */
  commit(stagingId: string, key: string): Promise<boolean>;
  /** Forgets a staged object. */
  discard(stagingId: string): Promise<void>;
  /** The object under `key` as a stream, with its size; null when there is none. */
  get(key: string): Promise<{ body: Readable; sizeBytes: number } | null>;
  delete(key: string): Promise<void>;
  /** Keys under `prefix`, in key order, with their sizes. */
  list(prefix: string): Promise<{ key: string; sizeBytes: number }[]>;
  /** Staging objects older than `olderThan` (ms since the epoch) go: uploads whose completion never came. */
  sweepStaging(olderThan: number): Promise<number>;
}

export interface StagedBlob {
  stagingId: string;
  sizeBytes: number;
  /** Lowercase hex SHA-256 of the bytes. */
  sha256: string;
}

export class BlobTooLargeError extends Error {
  override readonly name = 'BlobTooLargeError';
  constructor(readonly maxBytes: number) {
    super(`the upload is larger than ${maxBytes} bytes`);
  }
}

/** A key is a path of `[A-Za-z0-9._-]` segments joined by `/`: never `..`, never absolute. */
export function assertBlobKey(key: string): void {
  if (!/^[A-Za-z0-9._-]+(\/[A-Za-z0-9._-]+)*$/.test(key) || key.split('/').some((segment) => segment === '.' || segment === '..')) {
    throw new RangeError(`not a blob key: ${JSON.stringify(key)}`);
  }
}
