import type { LockFile } from '../../../machines/lock.types.ts';
import type { LockFileParseError } from '../errors.ts';

/** Where every provider reads the lock file (docs/lockfile.md#where-the-file-is-read). */
export const LOCK_FILE_PATH = '.kici/kici.lock.json';

/**
 * One fetch of the lock file at a commit (LOCK-2). `transient` is never a miss: the delivery is
 * retried (INT-6). `absent`: the commit is not in the repository, which a push race explains for a
 * little while only (a few retries). `invalid`: the request can never succeed (a malformed commit
 * id, a broken registration); the delivery is dead at once. `bytes` is the size of the file as stored.
 */
export type LockFetchOutcome =
  | { kind: 'found'; lock: LockFile; bytes: number }
  | { kind: 'miss'; detail: string }
  | { kind: 'corrupt'; error: LockFileParseError }
  | { kind: 'transient'; detail: string }
  | { kind: 'absent'; detail: string }
  | { kind: 'invalid'; detail: string };

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

/** The files a range of commits changed, or why they could not be listed (a retry may help). */
export type ChangedFilesOutcome = { files: string[] } | { transient: string };

/**
 * Lists the files changed between two commits (docs/lockfile.md#changed-files): from their merge
 * base to `head`, as GitHub's three-dot compare does; for a pull request, its own file list. A
 * renamed file is listed under both names. Implementations never throw.
 */
export interface ChangedFilesSource {
  between(range: { base: string; head: string; pullRequest?: number }): Promise<ChangedFilesOutcome>;
}

const COMMIT_SHA = /^[0-9a-fA-F]{7,64}$/;
const OBJECT_ID = /^(?:[0-9a-fA-F]{40}|[0-9a-fA-F]{64})$/;

/** A full or abbreviated commit id: 7–64 hex digits, so it can never be read as an option or a path. */
export function isCommitSha(value: string): boolean {
  return COMMIT_SHA.test(value);
}

/** A full object id: 40 (SHA-1) or 64 (SHA-256) hex digits, never ambiguous, an option or a path. */
export function isObjectId(value: string): boolean {
  return OBJECT_ID.test(value);
}
