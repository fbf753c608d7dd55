import type { AgentRequirements } from '../../machines/types.ts';

export interface QueuedRequest {
  runId: string;
  jobKey: string;
  requirements: AgentRequirements;
}

/**
 * The jobs waiting for an agent, first-queued first, indexed so that nothing the dispatcher does per
 * event walks every waiting job: by run (a finished run's jobs leave at once) and by requirements
 * (how many distinct kinds of agent are wanted, whatever the number of jobs).
 */
export class WaitingQueue<R extends QueuedRequest> {
  private readonly order = new Map<string, R>();
  private readonly byRun = new Map<string, Set<string>>();
  private readonly kinds = new Map<string, { requirements: AgentRequirements; count: number }>();
  private readonly kindOf = new Map<string, string>();

  get size(): number {
    return this.order.size;
  }

  has(key: string): boolean {
    return this.order.has(key);
  }

  get(key: string): R | undefined {
    return this.order.get(key);
  }

  /** Queues `request` last (moving it there when it was queued already). */
  set(key: string, request: R): void {
    this.delete(key);
    this.order.set(key, request);
    const keys = this.byRun.get(request.runId) ?? new Set<string>();
    keys.add(key);
    this.byRun.set(request.runId, keys);
    const kind = kindKey(request.requirements);
    this.kindOf.set(key, kind);
    const entry = this.kinds.get(kind);
    if (entry) entry.count += 1;
    else this.kinds.set(kind, { requirements: request.requirements, count: 1 });
  }

  delete(key: string): void {
    const request = this.order.get(key);
    if (!request) return;
    this.order.delete(key);
    const keys = this.byRun.get(request.runId);
    keys?.delete(key);
    if (keys?.size === 0) this.byRun.delete(request.runId);
    const kind = this.kindOf.get(key) ?? '';
    this.kindOf.delete(key);
    const entry = this.kinds.get(kind);
    if (entry && --entry.count === 0) this.kinds.delete(kind);
  }

  keys(): string[] {
    return [...this.order.keys()];
  }

  entries(): IterableIterator<[string, R]> {
    return this.order.entries();
  }

  /** The requirement sets jobs are waiting with, once each. */
  requirementKinds(): IterableIterator<{ requirements: AgentRequirements }> {
    return this.kinds.values();
  }

  /** The key of `request`'s requirement set: jobs with equal keys fit exactly the same agents. */
  kindOfKey(key: string): string | undefined {
    return this.kindOf.get(key);
  }

  deleteRun(runId: string): void {
    for (const key of [...(this.byRun.get(runId) ?? [])]) this.delete(key);
  }
}

function kindKey(requirements: AgentRequirements): string {
  return JSON.stringify(requirements);
}
