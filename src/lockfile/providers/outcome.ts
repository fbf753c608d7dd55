import { LockFileParseError } from '../errors.ts';
import { MAX_LOCK_FILE_BYTES, parseLockFile } from '../parse.ts';
import type { LockFetchOutcome } from './types.ts';

/** Validates fetched bytes: `found` or `corrupt` (docs/lockfile.md#what-counts-as-corrupt); the parser enforces the 5 MiB cap. */
export function outcomeOf(content: Buffer): LockFetchOutcome {
  const parsed = parseLockFile(content);
  if (!parsed.ok) return { kind: 'corrupt', error: parsed.error };
  return { kind: 'found', lock: parsed.lock, bytes: content.length };
}

/** A file known to be over the cap before its bytes are read; `size` is null when only a lower bound is known. */
export function oversizeOutcome(size: number | null): LockFetchOutcome {
  const found = size === null ? `more than ${MAX_LOCK_FILE_BYTES} bytes` : `${size} bytes`;
  const problem = `lock file is ${found}, over the ${MAX_LOCK_FILE_BYTES}-byte (5 MiB) limit`;
  return { kind: 'corrupt', error: new LockFileParseError('$', problem, 'file') };
}

/** Something other than a regular file sits at the lock file path (a directory, a submodule). */
export function notAFileOutcome(problem: string): LockFetchOutcome {
  return { kind: 'corrupt', error: new LockFileParseError('$', problem, 'file') };
}
