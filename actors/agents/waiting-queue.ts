import type { AgentRequirements } from '../../machines/types.ts';

export interface QueuedRequest {
  runId: string;
  jobKey: string;
  requirements: AgentRequirements;
}

/** The jobs waiting for one kind of agent (equal requirements), first-queued first. */
export interface WaitingKind<R> {
  /** The requirements as JSON: the kind's key. */
  key: string;
  requirements: AgentRequirements;
  entries: Map<string, { request: R; seq: number }>;
  /** The waiting reason every job of this kind was last told; cleared when a job joins. */
  toldReason: string | undefined;
}

/**
 * The jobs waiting for an agent, first-queued first, indexed so that nothing the dispatcher does per
 * event walks every waiting job: by run (a finished run's jobs leave at once) and by kind of agent
 * wanted (an offer looks each kind up once, whatever the number of jobs).
 */
export class WaitingQueue<R extends QueuedRequest> {
  private readonly byKey = new Map<string, { request: R; kind: WaitingKind<R> }>();
  /** A run's waiting keys: one key alone (most runs), a set once two wait (a set costs 0.2 KB of each waiting run). */
  private readonly byRun = new Map<string, string | Set<string>>();
  private readonly kinds = new Map<string, WaitingKind<R>>();
  private seq = 0;

  get size(): number {
    return this.byKey.size;
  }

  has(key: string): boolean {
    return this.byKey.has(key);
  }

  get(key: string): R | undefined {
    return this.byKey.get(key)?.request;
  }

  /** Queues `request` last (moving it there when it was queued already). */
  set(key: string, request: R): void {
    this.delete(key);
    const kindKey = JSON.stringify(request.requirements);
    let kind = this.kinds.get(kindKey);
    if (!kind) this.kinds.set(kindKey, (kind = { key: kindKey, requirements: request.requirements, entries: new Map(), toldReason: undefined }));
    kind.entries.set(key, { request, seq: (this.seq += 1) });
    kind.toldReason = undefined;
    this.byKey.set(key, { request, kind });
    const keys = this.byRun.get(request.runId);
    if (keys === undefined) this.byRun.set(request.runId, key);
    else if (typeof keys !== 'string') keys.add(key);
    else this.byRun.set(request.runId, new Set([keys, key]));
  }

  delete(key: string): void {
    const found = this.byKey.get(key);
    if (!found) return;
    this.byKey.delete(key);
    const { runId } = found.request;
    const keys = this.byRun.get(runId);
    if (keys === key) this.byRun.delete(runId);
    else if (typeof keys === 'object') {
      keys.delete(key);
      if (keys.size === 0) this.byRun.delete(runId);
    }
    found.kind.entries.delete(key);
    if (found.kind.entries.size === 0) this.kinds.delete(found.kind.key);
  }

  /** Every queued key, first-queued first (`set` re-inserts, so the map's order is the queue's). */
  keys(): string[] {
    return [...this.byKey.keys()];
  }

  /** The kinds of agent jobs are waiting for, each with its jobs. */
  requirementKinds(): IterableIterator<WaitingKind<R>> {
    return this.kinds.values();
  }

  deleteRun(runId: string): void {
    const keys = this.byRun.get(runId);
    for (const key of typeof keys === 'string' ? [keys] : [...(keys ?? [])]) this.delete(key);
  }
}
