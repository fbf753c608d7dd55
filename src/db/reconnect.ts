const RECONNECT_MS = [100, 500, 1_000, 2_000, 5_000] as const;

/**
 * How long to wait before opening again a connection of one's own (the peer bus's LISTEN, the
 * liveness lock) after its `failures`-th failure in a row: 0.1 s, 0.5 s, 1 s, 2 s, then 5 s.
 */
export function ownConnectionRetryMs(failures: number): number {
  return RECONNECT_MS[Math.min(failures, RECONNECT_MS.length - 1)] ?? 5_000;
}
