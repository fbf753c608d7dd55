import type { LockFile } from '../../machines/lock.types.ts';
import type { LockFetchOutcome } from './providers/types.ts';

export interface TtlLruOptions {
  maxEntries: number;
  ttlMs: number;
  /** Milliseconds; entries expire `ttlMs` after they were stored. */
  now: () => number;
}

/** A least-recently-used map whose entries also expire; reads count as hits or misses. */
export class TtlLru<V> {
  readonly #entries = new Map<string, { value: V; expiresAt: number }>();
  readonly #options: TtlLruOptions;
  #hits = 0;
  #misses = 0;

  constructor(options: TtlLruOptions) {
    this.#options = options;
  }

  get hits(): number {
    return this.#hits;
  }

  get misses(): number {
    return this.#misses;
  }

  get size(): number {
    return this.#entries.size;
  }

  /** An entry `accept` refuses is dropped and counted as a miss. */
  get(key: string, accept: (value: V) => boolean = () => true): V | undefined {
    const entry = this.#entries.get(key);
    if (entry === undefined || entry.expiresAt <= this.#options.now() || !accept(entry.value)) {
      if (entry !== undefined) this.#entries.delete(key);
      this.#misses += 1;
      return undefined;
    }
    this.#entries.delete(key);
    this.#entries.set(key, entry);
    this.#hits += 1;
    return entry.value;
  }

  set(key: string, value: V): void {
    this.#entries.delete(key);
    this.#entries.set(key, { value, expiresAt: this.#options.now() + this.#options.ttlMs });
    for (const oldest of this.#entries.keys()) {
      if (this.#entries.size <= this.#options.maxEntries) break;
      this.#entries.delete(oldest);
    }
  }

  /** Removes every entry whose value matches. */
  deleteWhere(matches: (value: V, key: string) => boolean): number {
    let removed = 0;
    for (const [key, entry] of this.#entries) {
      if (matches(entry.value, key)) {
        this.#entries.delete(key);
        removed += 1;
      }
    }
    return removed;
  }

  clear(): void {
    this.#entries.clear();
  }
}

export interface LockFileCacheOptions {
  /** @default 500 */
  maxEntries?: number;
  /** @default 3_600_000 (1 h) */
  ttlMs?: number;
  /** @default Date.now */
  now?: () => number;
}

export type CachedLock = { kind: 'found'; lock: LockFile; bytes: number };

/**
 * Validated lock files by `provider:repository:sha` (LOCK-5): a commit is immutable, so a found lock
 * file stays valid. Misses, corrupt files and transient errors are never stored.
 */
export class LockFileCache {
  readonly #lru: TtlLru<CachedLock>;
  /** Reads in flight, by key: a delivery for a commit being read joins the read. */
  readonly #reading = new Map<string, Promise<LockFetchOutcome>>();
  #joined = 0;

  constructor(options: LockFileCacheOptions = {}) {
    this.#lru = new TtlLru({
      maxEntries: options.maxEntries ?? 500,
      ttlMs: options.ttlMs ?? 60 * 60 * 1000,
      now: options.now ?? Date.now,
    });
  }

  /** `provider` is the provider's name, `<kind>:<repository>`, so the key is `kind:repository:sha`. */
  static key(provider: string, sha: string): string {
    return `${provider}:${sha.toLowerCase()}`;
  }

  /** Reads answered without a fetch of their own: from the cache, or by joining a read in flight. */
  get hits(): number {
    return this.#lru.hits + this.#joined;
  }

  get misses(): number {
    return this.#lru.misses;
  }

  get size(): number {
    return this.#lru.size;
  }

  get(provider: string, sha: string): CachedLock | undefined {
    return this.#lru.get(LockFileCache.key(provider, sha));
  }

  /**
   * The lock file at `sha`: the cached one, else what `fetch` answers, fetched once however many
   * deliveries ask for it at the same time (GitHub sends several for one commit: a push, its pull
   * request's `synchronize`, …). Only `found` outcomes are kept; the others are shared by the reads
   * that joined, and the next read fetches again.
   */
  read(provider: string, sha: string, fetch: () => Promise<LockFetchOutcome>): Promise<LockFetchOutcome> {
    const key = LockFileCache.key(provider, sha);
    const inFlight = this.#reading.get(key);
    if (inFlight !== undefined) {
      this.#joined += 1;
      return inFlight;
    }
    const cached = this.get(provider, sha);
    if (cached !== undefined) return Promise.resolve(cached);
    const reading = fetch()
      .then((outcome) => {
        this.set(provider, sha, outcome);
        return outcome;
      })
      .finally(() => this.#reading.delete(key));
    this.#reading.set(key, reading);
    return reading;
  }

  /** Stores `found` outcomes only; returns whether it stored. */
  set(provider: string, sha: string, outcome: LockFetchOutcome): boolean {
    if (outcome.kind !== 'found') return false;
    this.#lru.set(LockFileCache.key(provider, sha), outcome);
    return true;
  }
}
