import type { Logger } from 'pino';
import { coerceError } from '../../lib/errors.ts';
import type { AckHolder, CancelHolder } from '../../machines/job.withdrawal.ts';
import type { Effect } from '../runs/ports.ts';
import type { IncomingRunEvent } from '../runs/supervisor.ts';
import type { AgentRegistry } from './registry.ts';
import type { SharedAgents } from './shared-agents.ts';

export interface WithdrawalAnswersDeps {
  registry: AgentRegistry;
  /** Agents and the commands left for them, here and on the other coordinators. */
  shared: SharedAgents;
  /** The lease of the coordinator holding the agent's socket; null when no session of it is recorded. */
  holderLease(agentId: string): Promise<{ coordinatorId: string; leaseUntil: number } | null>;
  deliver: (runId: string, event: IncomingRunEvent) => Promise<unknown>;
  leaseTtlMs: number;
  leaseRenewMs: number;
  log: Logger;
}

/**
 * The host's answers to the questions the job chart asks once an ack deadline has passed
 * (machines/job.withdrawal.ts): each is looked up and sent back to the job as an event, and the chart
 * decides. Nothing is kept here between questions: the holds are the chart's states and deadlines.
 */
export class WithdrawalAnswers {
  constructor(private readonly deps: WithdrawalAnswersDeps) {}

  /** `askAckHolder`: where the overdue attempt's agent has its socket, answered as `ack.holder`. */
  async askAckHolder(effect: Effect<'askAckHolder'>): Promise<void> {
    const { jobKey, agentId } = effect.payload;
    const holder = await this.holderOf(agentId).catch((thrown: unknown): AckHolder => {
      this.deps.log.warn({ err: coerceError(thrown), runId: effect.runId, jobKey, agentId }, "cannot tell whether the agent's coordinator lives");
      return { kind: 'unknown' };
    });
    if (holder.kind === 'session') this.deps.log.info({ runId: effect.runId, jobKey, agentId, peer: holder.coordinatorId }, "ack deadline passed with the agent's socket on a peer: its lease decides");
    await this.deps.deliver(effect.runId, { type: 'ack.holder', jobKey, holder, leaseTtlMs: this.deps.leaseTtlMs, leaseRenewMs: this.deps.leaseRenewMs });
  }

  /** A withdrawn attempt's cancel was carried out: the job hears how, and how often to ask about it if it is fenced. */
  async reportCancel(effect: Effect<'sendCancel'>, holder: CancelHolder): Promise<void> {
    const { jobKey, agentId, dispatchId } = effect.payload;
    if (holder.kind === 'unreachable') {
      this.deps.log.warn({ runId: effect.runId, jobKey, agentId }, 'job.cancel found no socket of its agent on any coordinator: the job waits for this agent to come back, or for its recovery window');
    }
    await this.deps.deliver(effect.runId, { type: 'cancel.reported', jobKey, dispatchId, holder, pollMs: this.deps.leaseRenewMs });
  }

  /**
   * `checkCancelFence`: whether the cancel left with a peer has been carried out (its command row is
   * gone), or the unreachable agent has a socket again; a question that fails keeps the fence up
   * (its limit is a deadline of the job's), answered as `fence.checked`.
   */
  async checkCancelFence(effect: Effect<'checkCancelFence'>): Promise<void> {
    const { jobKey, agentId, commandId } = effect.payload;
    const lifted = await this.fenceLifted(agentId, commandId).catch((thrown: unknown) => {
      this.deps.log.warn({ err: coerceError(thrown), runId: effect.runId, jobKey }, 'cannot tell whether the cancel of the previous attempt went out; asking again');
      return false;
    });
    await this.deps.deliver(effect.runId, { type: 'fence.checked', jobKey, lifted });
  }

  private async holderOf(agentId: string): Promise<AckHolder> {
    if (this.deps.registry.get(agentId) !== undefined) return { kind: 'here' };
    const lease = await this.deps.holderLease(agentId);
    return lease === null ? { kind: 'none' } : { kind: 'session', ...lease };
  }

  private async fenceLifted(agentId: string, commandId: number | null): Promise<boolean> {
    if (commandId !== null) return !(await this.deps.shared.commandsWaiting([commandId])).has(commandId);
    return this.deps.shared.hasSocket(agentId);
  }
}
