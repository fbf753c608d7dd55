/** How waits between tries grow: from `baseMs`, times `factor` (2 unless said) after each, never past `maxMs`. */
export interface Backoff {
  baseMs: number;
  maxMs: number;
  factor?: number;
  /** Up to this share is added at random (0.5: up to half again), so that many waiting at once do not retry at once. */
  jitter?: number;
}

/**
 * The wait before retry `retry` (1: the first retry): `baseMs × factor^(retry − 1)`, plus jitter,
 * capped at `maxMs`. The one formula of every retry in this project; each caller names its policy.
 */
export function backoffMs(retry: number, policy: Backoff, random: () => number = Math.random): number {
  const grown = policy.baseMs * (policy.factor ?? 2) ** Math.max(0, retry - 1);
  const jittered = policy.jitter === undefined ? grown : grown * (1 + random() * policy.jitter);
  return Math.round(Math.min(policy.maxMs, jittered));
}
