import type { LockFile } from '../../../machines/lock.types.ts';
import type { LockFileParseError } from '../errors.ts';

/** Where every provider reads the lock file (lockfile.md §1). */
export const LOCK_FILE_PATH = '.kici/kici.lock.json';

/**
 * One fetch of the lock file at a commit (LOCK-2). `transient` is never a miss: the delivery is
 * retried (INT-6). `bytes` is the size of the file as stored.
 */
export type LockFetchOutcome =
  | { kind: 'found'; lock: LockFile; bytes: number }
  | { kind: 'miss'; detail: string }
  | { kind: 'corrupt'; error: LockFileParseError }
  | { kind: 'transient'; detail: string };

export type DefaultBranchHead = { sha: string; branch: string } | { transient: string };

/** A source of lock files for one repository (LOCK-1). Implementations never throw from `fetch`. */
export interface LockFileProvider {
  /** `<kind>:<repository>`, e.g. `local:acme/app` or `github:acme/app`; also the cache key prefix (LOCK-5). */
  readonly name: string;
  /** `sha: null` reads at the head of the default branch. */
  fetch(ref: { sha: string | null }): Promise<LockFetchOutcome>;
  /** Head commit of the default branch (for `sha: null` events), or a transient failure. */
  defaultBranchHead(): Promise<DefaultBranchHead>;
}

const COMMIT_SHA = /^[0-9a-fA-F]{7,64}$/;

/** A full or abbreviated commit id: 7–64 hex digits, so it can never be read as an option or a path. */
export function isCommitSha(value: string): boolean {
  return COMMIT_SHA.test(value);
}
