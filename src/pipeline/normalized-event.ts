import type { EventEnvelope } from './envelope.ts';

/** An event Switchyard may build, with where its lock file is read. */
export interface NormalizedEvent {
  envelope: EventEnvelope;
  /** The commit to read the lock file at; null = the default branch head. */
  sha: string | null;
  /** The full ref of that commit: `refs/heads/x`, `refs/tags/v1`, `refs/pull/7/head`, the release tag. */
  ref: string;
  /** Repository `full_name`. */
  repository: string;
  cloneUrl: string | null;
  installationId: number | null;
  /** Pull requests and reviews: `pull_request.base.sha`, where untrusted PRs read the lock file. */
  baseSha?: string;
}

/** An event with nothing to build; the delivery is recorded as `ignored`. */
export interface Dropped {
  dropped: string;
}

export function isDropped<T extends object>(result: T | Dropped): result is Dropped {
  return 'dropped' in result;
}
