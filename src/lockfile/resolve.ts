import type { LockFile } from '../../machines/lock.types.ts';
import { coerceError } from '../../lib/errors.ts';
import type { LockFileCache } from './cache.ts';
import type { LockFileParseError } from './errors.ts';
import type { LockFetchOutcome, LockFileProvider } from './providers/types.ts';

export interface LockCandidate {
  provider: LockFileProvider;
  /** What the run clones from when this source wins (LOCK-3). */
  cloneUrl: string | null;
}

export type LockResolution =
  | { kind: 'found'; lock: LockFile; provider: string; cloneUrl: string | null; sha: string }
  | { kind: 'miss' }
  | { kind: 'corrupt'; error: LockFileParseError }
  | { kind: 'transient'; detail: string }
  | { kind: 'absent'; detail: string }
  | { kind: 'invalid'; detail: string };

export interface ResolveLockFileInput {
  /** The inbound source first, then the other registered sources of the same repository. */
  candidates: readonly LockCandidate[];
  /** Null reads each candidate at the head of its default branch. */
  sha: string | null;
  cache: LockFileCache;
}

/**
 * LOCK-3: candidates are tried in order and the first valid lock file wins, so a valid fallback beats
 * a corrupt inbound file. With nothing valid: `transient` when any candidate could not answer (a retry
 * may still find a valid one), else `absent` when one lacks the commit (a short retry may), else
 * `invalid` when the read can never succeed (the detail names every candidate that did not answer),
 * else `corrupt` when a parse error was seen, else `miss`. Never throws.
 */
export async function resolveLockFile(input: ResolveLockFileInput): Promise<LockResolution> {
  let corrupt: LockFileParseError | null = null;
  const unanswered: { kind: Unanswered; detail: string }[] = [];
  for (const { provider, cloneUrl } of input.candidates) {
    const read = await readCandidate(provider, input.sha, input.cache);
    const { outcome, sha } = read;
    switch (outcome.kind) {
      case 'found':
        return { kind: 'found', lock: outcome.lock, provider: provider.name, cloneUrl, sha };
      case 'corrupt':
        corrupt ??= outcome.error;
        break;
      case 'transient':
      case 'absent':
      case 'invalid':
        unanswered.push({ kind: outcome.kind, detail: `${provider.name}: ${outcome.detail}` });
        break;
      case 'miss':
        break;
      default:
        return assertNever(outcome);
    }
  }
  const kind = UNANSWERED_FIRST.find((k) => unanswered.some((u) => u.kind === k));
  if (kind !== undefined) return { kind, detail: unanswered.map((u) => u.detail).join('; ') };
  if (corrupt !== null) return { kind: 'corrupt', error: corrupt };
  return { kind: 'miss' };
}

type Unanswered = 'transient' | 'absent' | 'invalid';
/** The most hopeful reason wins: a retry that may still help beats a verdict that it cannot. */
const UNANSWERED_FIRST: readonly Unanswered[] = ['transient', 'absent', 'invalid'];

async function readCandidate(
  provider: LockFileProvider,
  eventSha: string | null,
  cache: LockFileCache,
): Promise<{ outcome: LockFetchOutcome; sha: string }> {
  try {
    let sha = eventSha;
    if (sha === null) {
      const head = await provider.defaultBranchHead();
      if ('transient' in head) return { outcome: { kind: 'transient', detail: head.transient }, sha: '' };
      sha = head.sha;
    }
    return { outcome: await cache.read(provider.name, sha, () => provider.fetch({ sha })), sha };
  } catch (thrown) {
    // The port says providers never throw; one that does is treated as unreachable, never as a miss.
    const detail = `provider threw: ${coerceError(thrown).message}`;
    return { outcome: { kind: 'transient', detail }, sha: eventSha ?? '' };
  }
}

function assertNever(value: never): never {
  throw new Error(`unexpected lock fetch outcome ${JSON.stringify(value)}`);
}
