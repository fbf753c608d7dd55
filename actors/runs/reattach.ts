import type { Logger } from 'pino';
import { jobStatusOf } from '../../machines/projection.ts';
import type { AgentRegistry } from '../agents/registry.ts';
import type { Dispatcher } from '../agents/dispatcher.ts';
import type { SharedAgents } from '../agents/shared-agents.ts';
import { coerceError } from '../../lib/errors.ts';
import type { IncomingRunEvent, Supervisor } from './supervisor.ts';

export interface ReattachDeps {
  supervisor: Supervisor;
  registry: AgentRegistry;
  dispatcher: Dispatcher;
  deliver: (runId: string, event: IncomingRunEvent) => Promise<unknown>;
  /** Agents connected to any live coordinator (their jobs are not disconnected). */
  shared: Pick<SharedAgents, 'isConnectedAnywhere'>;
  log: Logger;
}

function waitsForAgent(value: unknown): boolean {
  return value === 'queued' || (typeof value === 'object' && value !== null && (value as { waiting?: unknown }).waiting === 'agent');
}

/**
 * Runs restored here after a restart or takeover pick up what lived only in the old process's
 * memory (FO-2): jobs waiting for an agent go back on the dispatcher's list, and jobs whose agent
 * has no session here are treated as disconnected (static agents get their recovery window).
 */
export async function reattachRuns(deps: ReattachDeps, runIds: string[]): Promise<void> {
  for (const runId of runIds) {
    for (const job of deps.supervisor.jobsOf(runId)) {
      try {
        const { assignment, requirements, attempt } = job.context;
        if (waitsForAgent(job.value)) {
          await deps.dispatcher.requestPlacement({ effectId: `reattach:${runId}:${job.jobKey}`, runId, kind: 'requestPlacement', payload: { jobKey: job.jobKey, requirements, attempt } });
          continue;
        }
        const status = jobStatusOf(job);
        const onAgent = status === 'running' || status === 'cancelling' || (status === 'queued' && assignment !== null);
        if (onAgent && assignment && !(await deps.shared.isConnectedAnywhere(assignment.agentId))) {
          // The agent may well be alive and reconnecting to us: even a scaler agent gets its recovery window.
          await deps.deliver(runId, { type: 'agent.disconnected', jobKey: job.jobKey, agentId: assignment.agentId, cause: 'coordinator' });
        }
      } catch (thrown) {
        deps.log.error({ err: coerceError(thrown), runId, jobKey: job.jobKey }, 'reattaching a restored job failed');
      }
    }
  }
}
