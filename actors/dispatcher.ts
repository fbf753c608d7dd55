import type { Logger } from 'pino';
import type { AgentRequirements, LabelMatcher, WaitingReason } from '../machines/types.ts';
import type { Effect } from './ports.ts';
import type { IncomingRunEvent } from './supervisor.ts';

/** Delivers an event to the run that owns a job. */
export type SendToRun = (runId: string, event: IncomingRunEvent) => Promise<unknown>;

export interface PlacementRequest {
  runId: string;
  jobKey: string;
  requirements: AgentRequirements;
  attempt: number;
}

/**
 * Places queued jobs on agents (DSP-2). It keeps no run state: it answers a placement request
 * with one event to the job's run actor, and remembers which jobs still wait for an agent so
 * that a new or freed agent can be offered to them first-queued first.
 */
export class Dispatcher {
  private readonly waiting = new Map<string, PlacementRequest>();

  constructor(
    private readonly sendToRun: SendToRun,
    private readonly log: Logger,
  ) {}

  get waitingCount(): number {
    return this.waiting.size;
  }

  async requestPlacement(effect: Effect): Promise<void> {
    const request = { runId: effect.runId, ...(effect.payload as Omit<PlacementRequest, 'runId'>) };
    this.waiting.set(`${request.runId}\u0000${request.jobKey}`, request);
    const reason = noAgentReason(request.requirements);
    this.log.debug({ runId: request.runId, jobKey: request.jobKey, reason: reason.message }, 'no agent for job');
    await this.sendToRun(request.runId, { type: 'placement.none', jobKey: request.jobKey, reason });
  }

  /** Forget jobs of a run that finished or moved to another coordinator. */
  forgetRun(runId: string): void {
    for (const [key, request] of this.waiting) if (request.runId === runId) this.waiting.delete(key);
  }
}

export function describeMatcher(matcher: LabelMatcher): string {
  return matcher.kind === 'exact' ? matcher.value : `/${matcher.source}/${matcher.flags}`;
}

export function noAgentReason(requirements: AgentRequirements): WaitingReason {
  const labels = requirements.runsOn.map(describeMatcher);
  const parts = [labels.length > 0 ? `labels ${labels.join(', ')}` : 'any labels'];
  if (requirements.runSteps) parts.push('that can execute run steps');
  return { kind: 'no_matching_agent', message: `no connected agent matches ${parts.join(' ')}` };
}
