import type { AgentRequirements } from '../../machines/types.ts';
import { agentCanTake, pickAgent } from './match.ts';
import type { AgentOffer } from './match.ts';

/** How the registry reaches one agent's socket; the WebSocket layer implements it. */
export interface AgentLink {
  send(message: object): void;
  close(code: number, reason: string): void;
}

export interface SlotHolder {
  runId: string;
  jobKey: string;
}

/** Who an attempt's wire `jobId` belongs to: O's own record, never the runId on the wire (docs/protocol.md#ownership-rule). */
export interface DispatchRecord extends SlotHolder {
  agentId: string;
  /** The connection the slot was reserved on, when this coordinator reserved it. */
  connectionId?: string;
  /** When the slot was freed; late messages are accepted for 30 s after it. */
  endedAt: number | null;
}

export const LATE_MESSAGE_GRACE_MS = 30_000;

export interface SessionObserver {
  added(session: AgentSession): void;
  removed(session: AgentSession): void;
}
/** Ended attempts are swept at most this often. */
const PRUNE_EVERY_MS = 1_000;

export interface AgentSession extends AgentOffer {
  connectionId: string;
  tokenId: string | null;
  maxConcurrency: number;
  scalerManaged: boolean;
  /** Not offered new jobs: silent for 90 s, draining, or its ack deadline passed (4031). */
  unusable: string | null;
  /** When the connection last received any frame from the agent: a slow agent is not a silent one. */
  lastFrameAt: number;
  slots: Map<string, SlotHolder>;
  /** Dispatch ids already sent on this connection: effects are at-least-once, frames are not. */
  sent: Set<string>;
  link: AgentLink;
}

/**
 * The connected agents of this coordinator and their slots. The registry is the only owner of
 * slot counts (`agent.status` from the agent never overwrites them, docs/protocol.md#labels-executors-and-matching).
 */
export class AgentRegistry {
  private readonly sessions = new Map<string, AgentSession>();
  private readonly listeners: (() => void)[] = [];
  private readonly sessionObservers: SessionObserver[] = [];
  private readonly dispatches = new Map<string, DispatchRecord>();
  /**
   * Ended attempts by dispatch id, in the order they were marked ended (the order of their `endedAt`,
   * but for one remembered after a restart with an older end), so a sweep reads only the ones past
   * the grace instead of every record: with 500 jobs ending a second, the full walk took 0.9% of a
   * busy coordinator.
   */
  private readonly ended = new Map<string, DispatchRecord>();
  private prunedAt = 0;

  constructor(private readonly now: () => number = Date.now) {}

  dispatchOf(dispatchId: string): DispatchRecord | undefined {
    return this.dispatches.get(dispatchId);
  }

  /** Records an attempt learned after a restart (reclaim), without taking a slot. */
  rememberDispatch(dispatchId: string, record: DispatchRecord): void {
    this.dispatches.set(dispatchId, record);
    if (record.endedAt !== null) this.markEnded(dispatchId, record);
  }

  get size(): number {
    return this.sessions.size;
  }

  all(): AgentSession[] {
    return [...this.sessions.values()];
  }

  get(agentId: string): AgentSession | undefined {
    return this.sessions.get(agentId);
  }

  /** Called when capacity may have appeared: a new agent, a freed slot. */
  onCapacity(listener: () => void): void {
    this.listeners.push(listener);
  }

  /** Told of every session that starts or ends here (shared agents record them for peers). */
  observeSessions(observer: SessionObserver): void {
    this.sessionObservers.push(observer);
  }

  add(session: AgentSession): void {
    this.sessions.set(session.agentId, session);
    for (const observer of this.sessionObservers) observer.added(session);
    this.capacityChanged();
  }

  /** Removes the session if it is still this connection's; returns the jobs it held. */
  remove(agentId: string, connectionId: string): SlotHolder[] {
    const session = this.sessions.get(agentId);
    if (!session || session.connectionId !== connectionId) return [];
    this.sessions.delete(agentId);
    for (const observer of this.sessionObservers) observer.removed(session);
    return [...session.slots.values()];
  }

  reserve(agentId: string, dispatchId: string, holder: SlotHolder): void {
    const session = this.sessions.get(agentId);
    session?.slots.set(dispatchId, holder);
    const connection = session ? { connectionId: session.connectionId } : {};
    this.dispatches.set(dispatchId, { ...holder, agentId, endedAt: null, ...connection });
  }

  /** Frees the slot (idempotent); the attempt's record lives on through the late-message grace. */
  release(agentId: string, dispatchId: string): void {
    const record = this.dispatches.get(dispatchId);
    if (record && record.endedAt === null) {
      record.endedAt = this.now();
      this.markEnded(dispatchId, record);
    }
    this.pruneEnded();
    const session = this.sessions.get(agentId);
    if (session?.slots.delete(dispatchId)) this.capacityChanged();
  }

  private pruneEnded(): void {
    const now = this.now();
    if (now - this.prunedAt < PRUNE_EVERY_MS) return;
    this.prunedAt = now;
    const horizon = now - LATE_MESSAGE_GRACE_MS;
    for (const [id, record] of this.ended) {
      // A record remembered with an old end may stand after newer ones: the walk stops at the first
      // in the grace, and such a record goes with a later sweep.
      if (record.endedAt !== null && record.endedAt >= horizon) break;
      this.ended.delete(id);
      // The id may name a newer record since (a reclaim, a reservation): only the ended one goes.
      if (this.dispatches.get(id) === record) this.dispatches.delete(id);
    }
  }

  private markEnded(dispatchId: string, record: DispatchRecord): void {
    this.ended.delete(dispatchId);
    this.ended.set(dispatchId, record);
  }

  /**
   * Closes the agent's socket for `reason`, unless it sent a frame within `aliveWindowMs`: a slow but
   * alive agent keeps its socket (and stays usable). Returns whether it was closed.
   */
  closeIfSilent(agentId: string, code: number, reason: string, aliveWindowMs: number): boolean {
    const session = this.sessions.get(agentId);
    if (!session || this.now() - session.lastFrameAt <= aliveWindowMs) return false;
    this.markUnusable(agentId, reason);
    session.link.close(code, reason);
    return true;
  }

  markUnusable(agentId: string, why: string): void {
    const session = this.sessions.get(agentId);
    if (session) session.unusable = why;
  }

  /** Back in service when it was out for `why` (a silent agent heartbeats again): waiting jobs may go to it. */
  markUsable(agentId: string, why: string): void {
    const session = this.sessions.get(agentId);
    if (session?.unusable !== why) return;
    session.unusable = null;
    this.capacityChanged();
  }

  /** An agent with a free slot that can take the job, or why there is none. */
  find(requirements: AgentRequirements): { session: AgentSession } | { none: 'no_matching_agent' | 'capacity'; matching: number } {
    const matching = this.all().filter((session) => agentCanTake(requirements, session));
    const free = matching.filter((session) => session.unusable === null && session.slots.size < session.maxConcurrency);
    const session = pickAgent(requirements, free);
    if (session) return { session };
    return { none: matching.length === 0 ? 'no_matching_agent' : 'capacity', matching: matching.length };
  }

  private capacityChanged(): void {
    for (const listener of this.listeners) listener();
  }
}
