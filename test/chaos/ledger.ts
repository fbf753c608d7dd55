/**
 * What the agents saw, in the harness's own clock: each attempt from the moment an agent received
 * its `job.dispatch` until the agent stopped working on it (finished, cancelled, or the agent died).
 * Two attempts of the same job whose intervals intersect are one job dispatched twice at once (to two agents, or twice to one).
 */
export type AttemptEnd = 'finished' | 'cancelled' | 'killed' | 'abandoned';

export interface AttemptRecord {
  runId: string;
  jobName: string;
  dispatchId: string;
  agentId: string;
  start: number;
  end: number | null;
  how: AttemptEnd | null;
}

export interface Overlap {
  runId: string;
  jobName: string;
  first: AttemptRecord;
  second: AttemptRecord;
}

export class AttemptLedger {
  private readonly attempts = new Map<string, AttemptRecord>();
  /** Dispatches whose `job.ack` the agents "lost" on purpose. */
  lostAcks = 0;

  start(record: Omit<AttemptRecord, 'start' | 'end' | 'how'>): void {
    const key = `${record.agentId}/${record.dispatchId}`;
    if (!this.attempts.has(key)) this.attempts.set(key, { ...record, start: performance.now(), end: null, how: null });
  }

  end(agentId: string, dispatchId: string, how: AttemptEnd): void {
    const record = this.attempts.get(`${agentId}/${dispatchId}`);
    if (record && record.end === null) {
      record.end = performance.now();
      record.how = how;
    }
  }

  get size(): number {
    return this.attempts.size;
  }

  open(): AttemptRecord[] {
    return [...this.attempts.values()].filter((a) => a.end === null);
  }

  /** Pairs of attempts of one job held by two agents at the same time. */
  overlaps(): Overlap[] {
    const byJob = new Map<string, AttemptRecord[]>();
    for (const attempt of this.attempts.values()) {
      const key = `${attempt.runId}/${attempt.jobName}`;
      byJob.set(key, [...(byJob.get(key) ?? []), attempt]);
    }
    const found: Overlap[] = [];
    for (const attempts of byJob.values()) {
      const sorted = attempts.sort((a, b) => a.start - b.start);
      for (let i = 1; i < sorted.length; i++) {
        const second = sorted[i] as AttemptRecord;
        for (const first of sorted.slice(0, i)) {
          if (first.dispatchId !== second.dispatchId && (first.end ?? Infinity) > second.start) {
            found.push({ runId: second.runId, jobName: second.jobName, first, second });
          }
        }
      }
    }
    return found;
  }
}
