import type { Logger } from 'pino';
import { coerceError } from '../../lib/errors.ts';
import { jobKeyOf } from '../../lib/job-key.ts';
import type { Clock } from '../clock.ts';
import type { WaitingCancel } from './shared-agents.ts';

export interface CancelFencePorts {
  /** Of these commands, those still waiting for a live coordinator to carry them out (one question for all). */
  commandsWaiting(ids: readonly number[]): Promise<Set<number>>;
  /** The cancels of these runs' jobs still waiting for a live coordinator other than this one. */
  cancelsWaitingFor(runIds: readonly string[]): Promise<WaitingCancel[]>;
  /** The agent has a socket here, or a session on another live coordinator. */
  agentReachable(agentId: string): Promise<boolean>;
  /** A job's fence came down: waiting jobs may be placed again. */
  onLifted(): void;
  clock: Clock;
  /** How often a raised fence asks whether its cancel went out. */
  pollMs: number;
  /** A fence comes down after this long whatever the answers (a database that does not answer must not hold a job for ever). */
  maxHoldMs: number;
  /** The longest an unreachable agent's fence holds: the recovery window, which an agent lost with an attempt gets. */
  unreachableHoldMs: number;
  log: Logger;
}

/** A cancel left in a peer's outbox (`peer`), or one that found no socket of its agent anywhere (`unreachable`). */
type Fence = { kind: 'peer'; agentId: string; coordinatorId: string; commandId: number; raisedAt: number } | { kind: 'unreachable'; agentId: string; raisedAt: number };

/** Who a fenced job waits for: the coordinator holding the cancel, or (null) the agent's return. */
export interface FenceHold {
  agentId: string;
  coordinatorId: string | null;
}

/**
 * A job whose attempt was cancelled on an agent whose socket is on another coordinator is not placed
 * again until that coordinator has passed the cancel on (its command row is gone), or has died (its
 * lease ran out, and the agent's socket with it). A peer frozen right after it let an ack deadline
 * through held the cancel while the job was granted to a second agent, and both ran it (B7, chaos
 * seed 824801636). The job's own cancel effect raises the fence before its run's next effect (the
 * request for an agent) runs: a run's effects run in order.
 *
 * A cancel that finds no socket of its agent anywhere raises one too. Only the ack deadline requeues
 * an attempt and cancels it, and its expiry is held (ack-hold.ts) unless the agent's socket is live;
 * so the socket was cut between that look and the cancel, and the agent may be running the attempt.
 * The job waits until the agent is back (its reclaim of the attempt is then refused, which cancels it)
 * or its recovery window has passed, as for an agent lost before its deadline.
 */
export class CancelFence {
  private readonly fences = new Map<string, Fence>();
  private timer: unknown = null;

  constructor(private readonly ports: CancelFencePorts) {}

  raise(runId: string, jobKey: string, fence: { agentId: string; coordinatorId: string; commandId: number }): void {
    this.fences.set(jobKeyOf(runId, jobKey), { kind: 'peer', ...fence, raisedAt: this.ports.clock.now() });
    this.schedule();
  }

  /** The cancel of the job's attempt found no socket of its agent on any coordinator. */
  raiseUnreachable(runId: string, jobKey: string, agentId: string): void {
    this.fences.set(jobKeyOf(runId, jobKey), { kind: 'unreachable', agentId, raisedAt: this.ports.clock.now() });
    this.ports.log.warn({ runId, jobKey, agentId }, 'job.cancel found no socket of its agent on any coordinator: should the job ask for an agent, it waits for this one to come back, or for its recovery window');
    this.schedule();
  }

  /**
   * Runs about to be restored here (a takeover, a restart): the fences their previous owner raised
   * and whose cancel still waits are raised again, before any of their jobs can be placed. Their
   * longest hold counts from when the cancel was left. A question that fails is logged, and the jobs
   * are placed as if no cancel waited: holding the takeover back would hold every run.
   */
  async raiseStored(runIds: readonly string[]): Promise<void> {
    if (runIds.length === 0) return;
    const waiting = await this.ports.cancelsWaitingFor(runIds).catch((thrown: unknown) => {
      this.ports.log.warn({ err: coerceError(thrown), runs: runIds.length }, 'cannot tell whether the restored runs have cancels waiting on other coordinators; their jobs are placed at once');
      return [];
    });
    const now = this.ports.clock.now();
    for (const cancel of waiting) {
      const fence = { kind: 'peer' as const, agentId: cancel.agentId, coordinatorId: cancel.coordinatorId, commandId: cancel.commandId, raisedAt: Math.min(cancel.sentAt, now) };
      this.fences.set(jobKeyOf(cancel.runId, cancel.jobKey), fence);
    }
    if (waiting.length > 0) this.ports.log.info({ fences: waiting.length }, 'restored runs: cancels still waiting on other coordinators; their jobs wait for them');
    this.schedule();
  }

  /** The cancel of the job's last attempt is still on its way to its agent. */
  holds(runId: string, jobKey: string): FenceHold | null {
    const fence = this.fences.get(jobKeyOf(runId, jobKey));
    if (!fence) return null;
    return { agentId: fence.agentId, coordinatorId: fence.kind === 'peer' ? fence.coordinatorId : null };
  }

  stop(): void {
    if (this.timer !== null) this.ports.clock.clearTimeout(this.timer);
    this.timer = null;
    this.fences.clear();
  }

  private schedule(): void {
    if (this.timer !== null || this.fences.size === 0) return;
    this.timer = this.ports.clock.setTimeout(() => {
      this.timer = null;
      void this.check().finally(() => this.schedule());
    }, this.ports.pollMs);
  }

  private async check(): Promise<void> {
    const now = this.ports.clock.now();
    const fences = [...this.fences];
    // A fence past its longest hold is not asked about, and so comes down below.
    const asked = fences.flatMap(([, fence]) => (fence.kind === 'peer' && now - fence.raisedAt < this.ports.maxHoldMs ? [fence.commandId] : []));
    const [waiting, away] = await Promise.all([
      this.ports.commandsWaiting(asked).catch((thrown: unknown) => this.stillWaiting(thrown, asked)),
      this.agentsAway(fences.map(([, fence]) => fence).filter((fence) => fence.kind === 'unreachable' && now - fence.raisedAt < this.ports.unreachableHoldMs)),
    ]);
    let lifted = false;
    for (const [key, fence] of fences) {
      const up = fence.kind === 'peer' ? waiting.has(fence.commandId) : away.has(fence.agentId);
      if (up || this.fences.get(key) !== fence) continue;
      this.fences.delete(key);
      lifted = true;
    }
    if (lifted) this.ports.onLifted();
  }

  /** Of the unreachable fences' agents, those still with no socket anywhere (or not known: a failed question keeps its fence up). */
  private async agentsAway(fences: readonly Fence[]): Promise<Set<string>> {
    const agentIds = [...new Set(fences.map((fence) => fence.agentId))];
    const reachable = await Promise.all(agentIds.map((agentId) => this.ports.agentReachable(agentId).catch(() => false)));
    return new Set(agentIds.filter((_, i) => reachable[i] !== true));
  }

  /** A question that failed leaves every fence it asked about up. */
  private stillWaiting(thrown: unknown, asked: number[]): Set<number> {
    this.ports.log.warn({ err: coerceError(thrown) }, 'cannot tell whether a cancel on another coordinator went out; asking again');
    return new Set(asked);
  }
}

