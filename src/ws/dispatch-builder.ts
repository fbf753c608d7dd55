import { randomUUID } from 'node:crypto';
import type { LockStaticJob, LockWorkflow } from '../../machines/lock.types.ts';
import type { JobContext } from '../../machines/job.setup.ts';
import type { RunSource } from '../pipeline/run-source.ts';
import { describeIssues } from './messages.ts';
import { dispatchSchema } from './messages.ts';
import type { JobDispatch } from './messages.ts';

export interface DispatchTarget {
  runId: string;
  jobKey: string;
  dispatchId: string;
  job: Pick<JobContext, 'baseName' | 'matrix'>;
  agentLabels: readonly string[];
}

export type BuiltDispatch = { ok: true; dispatch: JobDispatch } | { ok: false; reason: string };

function lockJobOf(workflow: LockWorkflow, baseName: string): LockStaticJob | undefined {
  return workflow.jobs.find((job): job is LockStaticJob => job._type === 'static' && job.name === baseName);
}

/**
 * Builds `job.dispatch` from the run's frozen source (protocol.md §9.3) and validates it with our
 * own copy of the agent's schema: a dispatch the agent would silently drop fails here instead.
 */
export function buildDispatch(source: RunSource, target: DispatchTarget, now: number): BuiltDispatch {
  const lockJob = lockJobOf(source.workflow, target.job.baseName);
  if (!lockJob) return { ok: false, reason: `job ${target.job.baseName} is not in the run's workflow` };
  const { job } = target;
  const jobConfig = {
    workflowName: source.workflow.name,
    name: target.jobKey,
    baseJobName: lockJob.name,
    ...(source.workflow.source ? { source: source.workflow.source } : {}),
    steps: lockJob.steps,
    needs: lockJob.needs,
    event: source.event ?? undefined,
    provider: source.provider,
    ...(job.matrix?.values ? { matrixValues: job.matrix.values } : {}),
    ...(job.matrix ? { fanoutIndex: job.matrix.index, fanoutTotal: job.matrix.total } : {}),
    agent: { labels: [...target.agentLabels] },
    environmentVars: {},
    jobEnv: source.resolvedEnv?.[lockJob.name] ?? (lockJob.env && !('_type' in lockJob.env) ? lockJob.env : {}),
    ...(lockJob.timeout ? { timeout: lockJob.timeout } : {}),
    gracePeriod: lockJob.gracePeriod ?? 30,
    checkout: source.repoUrl !== null && lockJob.checkout !== false,
    runsOnPick: lockJob.runsOnPick ?? 'deterministic',
  };
  const candidate = {
    type: 'job.dispatch' as const,
    messageId: randomUUID(),
    runId: target.runId,
    jobId: target.dispatchId,
    repoUrl: source.repoUrl ?? 'none:',
    ref: source.ref,
    sha: source.sha,
    lockFileUrl: '',
    jobConfig,
    timestamp: now,
  };
  const parsed = dispatchSchema.safeParse(candidate);
  if (!parsed.success) return { ok: false, reason: `invalid dispatch: ${describeIssues(parsed.error)}` };
  return { ok: true, dispatch: parsed.data };
}
