import type { Logger } from 'pino';
import type { AgentRegistry, DispatchRecord } from '../../actors/agent-registry.ts';
import { LATE_MESSAGE_GRACE_MS } from '../../actors/agent-registry.ts';
import type { IncomingRunEvent } from '../../actors/supervisor.ts';
import { redactEnvVars, redactSecrets } from '../security/redact.ts';
import { jobStatusReportOf, stepRecordOf } from './job-reports.ts';
import type { AgentMessageOf } from './messages.ts';

export type JobScopedMessage = AgentMessageOf<
  'job.ack' | 'job.reject' | 'job.status' | 'step.status' | 'job.heartbeat' | 'log.chunk' | 'job.context' | 'run.event'
>;

export const JOB_SCOPED_TYPES = new Set<string>([
  'job.ack',
  'job.reject',
  'job.status',
  'step.status',
  'job.heartbeat',
  'log.chunk',
  'job.context',
  'run.event',
]);

export interface JobMessageDeps {
  registry: AgentRegistry;
  deliver: (runId: string, event: IncomingRunEvent) => Promise<unknown>;
  /** The attempt's record: the registry's, or the job projection's after a restart. */
  lookupDispatch: (dispatchId: string) => Promise<DispatchRecord | null>;
  appendLog: (args: { runId: string; jobKey: string; dispatchId: string; stepIndex: number; lines: string[] }) => Promise<void>;
  now: () => number;
  log: Logger;
}

/**
 * One job-scoped message from an agent becomes exactly one event for the job's run actor
 * (or one log write). Only the agent that owns the attempt may speak for it (protocol.md §12).
 */
export async function handleJobMessage(deps: JobMessageDeps, agentId: string, message: JobScopedMessage): Promise<'ok' | 'violation'> {
  const dispatchId = message.jobId;
  if (dispatchId === null) return 'ok';
  const record = await deps.lookupDispatch(dispatchId);
  const late = record?.endedAt != null && deps.now() - record.endedAt > LATE_MESSAGE_GRACE_MS;
  if (!record || record.agentId !== agentId || late) {
    deps.log.warn({ agentId, dispatchId, type: message.type }, 'job message from an agent that does not own the attempt; dropped');
    return 'violation';
  }
  const { runId, jobKey } = record;
  const base = { jobKey, agentId, dispatchId };
  switch (message.type) {
    case 'job.ack':
      await deps.deliver(runId, { type: 'agent.job.ack', ...base });
      return 'ok';
    case 'job.reject':
      if (message.reason === 'draining') deps.registry.markUnusable(agentId, 'draining');
      await deps.deliver(runId, { type: 'agent.job.reject', reason: message.reason, ...base });
      return 'ok';
    case 'job.status':
      await deps.deliver(runId, { type: 'agent.job.status', ...jobStatusReportOf(message), ...base });
      return 'ok';
    case 'step.status':
      await deps.deliver(runId, { type: 'agent.step.status', step: stepRecordOf(message), ...base });
      return 'ok';
    case 'job.heartbeat':
      await deps.deliver(runId, { type: 'agent.job.heartbeat', ...base });
      return 'ok';
    case 'log.chunk':
      await deps.appendLog({ runId, jobKey, dispatchId, stepIndex: message.stepIndex, lines: message.lines.map((l) => redactSecrets(l, [])) });
      return 'ok';
    case 'job.context':
      deps.log.debug({ runId, jobKey, env: redactEnvVars(message.context.envVars ?? [], []) }, 'job context (redacted)');
      return 'ok';
    case 'run.event':
      deps.log.debug({ runId, jobKey, eventType: message.eventType }, 'agent run event');
      return 'ok';
  }
}
