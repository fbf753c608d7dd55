/** One spawn failure as the tracker keeps it (SCL-9, docs/requirements.md). */
export interface SpawnFailure {
  backendName: string;
  backendType: string;
  bound: boolean;
  detail: string;
  timestampMs: number;
}

export interface BackendFailureSummary {
  backendType: string;
  boundCount: number;
  unboundCount: number;
  lastError: string;
  lastAtMs: number;
}

export const FAILURE_RING_SIZE = 256;
/** The window `diagnose` summarises over. */
export const DIAGNOSE_WINDOW_MS = 5 * 60_000;

/** The last 256 spawn failures, oldest overwritten first; the clock comes from the caller. */
export class FailureTracker {
  private readonly ring: (SpawnFailure | undefined)[] = new Array<SpawnFailure | undefined>(FAILURE_RING_SIZE);
  private next = 0;
  private count = 0;

  record(failure: SpawnFailure): void {
    this.ring[this.next] = failure;
    this.next = (this.next + 1) % FAILURE_RING_SIZE;
    this.count = Math.min(this.count + 1, FAILURE_RING_SIZE);
  }

  get size(): number {
    return this.count;
  }

  /** Oldest first. */
  entries(): SpawnFailure[] {
    const start = this.count < FAILURE_RING_SIZE ? 0 : this.next;
    const out: SpawnFailure[] = [];
    for (let i = 0; i < this.count; i++) {
      const entry = this.ring[(start + i) % FAILURE_RING_SIZE];
      if (entry) out.push(entry);
    }
    return out;
  }

  /** Per backend, the failures in `(nowMs - windowMs, nowMs]`; backends without any are absent. */
  recentByBackend(windowMs: number, nowMs: number): Record<string, BackendFailureSummary> {
    const summary: Record<string, BackendFailureSummary> = {};
    for (const failure of this.entries()) {
      if (failure.timestampMs <= nowMs - windowMs || failure.timestampMs > nowMs) continue;
      const entry = (summary[failure.backendName] ??= {
        backendType: failure.backendType,
        boundCount: 0,
        unboundCount: 0,
        lastError: failure.detail,
        lastAtMs: failure.timestampMs,
      });
      if (failure.bound) entry.boundCount += 1;
      else entry.unboundCount += 1;
      if (failure.timestampMs >= entry.lastAtMs) {
        entry.lastError = failure.detail;
        entry.lastAtMs = failure.timestampMs;
      }
    }
    return summary;
  }
}
