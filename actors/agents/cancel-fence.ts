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
  /** A job's fence came down: waiting jobs may be placed again. */
  onLifted(): void;
  clock: Clock;
  /** How often a raised fence asks whether its cancel went out. */
  pollMs: number;
  /** A fence comes down after this long whatever the answers (a database that does not answer must not hold a job for ever). */
  maxHoldMs: number;
  log: Logger;
}

interface Fence {
  agentId: string;
  coordinatorId: string;
  commandId: number;
  raisedAt: number;
}

/**
 * A job whose attempt was cancelled on an agent whose socket is on another coordinator is not placed
 * again until that coordinator has passed the cancel on (its command row is gone), or has died (its
 * lease ran out, and the agent's socket with it). A peer frozen right after it let an ack deadline
 * through held the cancel while the job was granted to a second agent, and both ran it (B7, chaos
 * seed 824801636). The job's own cancel effect raises the fence before its run's next effect (the
 * request for an agent) runs: a run's effects run in order.
 */
export class CancelFence {
  private readonly fences = new Map<string, Fence>();
  private timer: unknown = null;

  constructor(private readonly ports: CancelFencePorts) {}

  raise(runId: string, jobKey: string, fence: Omit<Fence, 'raisedAt'>): void {
    this.fences.set(jobKeyOf(runId, jobKey), { ...fence, raisedAt: this.ports.clock.now() });
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
      const fence = { agentId: cancel.agentId, coordinatorId: cancel.coordinatorId, commandId: cancel.commandId, raisedAt: Math.min(cancel.sentAt, now) };
      this.fences.set(jobKeyOf(cancel.runId, cancel.jobKey), fence);
    }
    if (waiting.length > 0) this.ports.log.info({ fences: waiting.length }, 'restored runs: cancels still waiting on other coordinators; their jobs wait for them');
    this.schedule();
  }

  /** The cancel of the job's last attempt is still on its way to an agent on another coordinator. */
  holds(runId: string, jobKey: string): { agentId: string; coordinatorId: string } | null {
    return this.fences.get(jobKeyOf(runId, jobKey)) ?? null;
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
    const asked = fences.filter(([, fence]) => now - fence.raisedAt < this.ports.maxHoldMs).map(([, fence]) => fence.commandId);
    const waiting = await this.ports.commandsWaiting(asked).catch((thrown: unknown) => this.stillWaiting(thrown, asked));
    let lifted = false;
    for (const [key, fence] of fences) {
      if (waiting.has(fence.commandId) || this.fences.get(key) !== fence) continue;
      this.fences.delete(key);
      lifted = true;
    }
    if (lifted) this.ports.onLifted();
  }

  /** A question that failed leaves every fence it asked about up. */
  private stillWaiting(thrown: unknown, asked: number[]): Set<number> {
    this.ports.log.warn({ err: coerceError(thrown) }, 'cannot tell whether a cancel on another coordinator went out; asking again');
    return new Set(asked);
  }
}

