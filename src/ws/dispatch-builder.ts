import { randomUUID } from 'node:crypto';
import type { LockStaticJob, LockWorkflow } from '../../machines/lock.types.ts';
import type { JobContext } from '../../machines/job.setup.ts';
import type { JobSpec } from '../../machines/job.context.ts';
import { INIT_JOB_TIMEOUT_MS, buildJobKey, isBuildJobKey } from '../../machines/run.plan.ts';
import type { InitTarget } from '../../machines/types.ts';
import type { RunSource } from '../pipeline/run-source.ts';
import { cacheRefScopeOf } from '../pipeline/trust.ts';
import { describeIssues } from './messages.ts';
import { dispatchSchema } from './messages.ts';
import type { JobDispatch } from './messages.ts';

export interface DispatchTarget {
  runId: string;
  jobKey: string;
  dispatchId: string;
  job: Pick<JobSpec, 'baseName' | 'matrix' | 'initFor'> & Pick<JobContext, 'upstream' | 'resolved'>;
  agentLabels: readonly string[];
}

export type BuiltDispatch = { ok: true; dispatch: JobDispatch } | { ok: false; reason: string };

function lockJobOf(workflow: LockWorkflow, baseName: string): LockStaticJob | undefined {
  return workflow.jobs.find((job): job is LockStaticJob => job._type === 'static' && job.name === baseName);
}

/**
 * Builds `job.dispatch` from the run's frozen source (docs/protocol.md#jobdispatch) and validates it with our
 * own copy of the agent's schema: a dispatch the agent would silently drop fails here instead.
 */
export function buildDispatch(source: RunSource, target: DispatchTarget, now: number): BuiltDispatch {
  const { initFor } = target.job;
  const building = target.job.baseName === buildJobKey(source.workflow.name);
  const lockJob = building ? undefined : lockJobOf(source.workflow, initFor?.targetJobName ?? target.job.baseName);
  if (!lockJob && !building) return { ok: false, reason: `job ${initFor?.targetJobName ?? target.job.baseName} is not in the run's workflow` };
  const jobConfig = !lockJob ? buildJobConfig(source, target) : initFor ? initJobConfig(source, initFor) : jobConfigOf(source, target, lockJob);
  const upstream = withoutBuild(target.job.upstream);
  const candidate = {
    type: 'job.dispatch' as const,
    messageId: randomUUID(),
    runId: target.runId,
    jobId: target.dispatchId,
    repoUrl: source.repoUrl ?? 'none:',
    // A run started by hand for no branch or commit: the agent checks out what the clone gives.
    ref: source.ref || 'HEAD',
    sha: source.sha || 'HEAD',
    lockFileUrl: '',
    jobConfig,
    timestamp: now,
    ...(upstream && { upstreamJobStatuses: upstream.statuses, upstreamJobOutputs: upstream.outputs }),
    // TRUST-5; a run stored without a tier gets the agent's default (isolated).
    ...(source.trustTier && { cacheRefScope: cacheRefScopeOf(source.trustTier) }),
  };
  const parsed = dispatchSchema.safeParse(candidate);
  if (!parsed.success) return { ok: false, reason: `invalid dispatch: ${describeIssues(parsed.error)}` };
  return { ok: true, dispatch: parsed.data };
}

/** What the stock agent checks the workflow source against; absent when the lock has no TypeScript source. */
function sourceIdentity(workflow: LockWorkflow) {
  return {
    ...(workflow.contentHash ? { contentHash: workflow.contentHash } : {}),
    ...(workflow.resolvedHashFiles?.length ? { resolvedHashFiles: workflow.resolvedHashFiles } : {}),
  };
}

function jobConfigOf(source: RunSource, target: DispatchTarget, lockJob: LockStaticJob) {
  const { job } = target;
  const staticEnv = lockJob.env && !('_type' in lockJob.env) ? lockJob.env : {};
  return {
    workflowName: source.workflow.name,
    name: target.jobKey,
    baseJobName: lockJob.name,
    ...(source.workflow.source ? { source: source.workflow.source } : {}),
    ...sourceIdentity(source.workflow),
    steps: lockJob.steps,
    needs: lockJob.needs,
    ...(lockJob.rules ? { rules: lockJob.rules } : {}),
    event: source.event ?? undefined,
    provider: source.provider,
    ...(job.matrix?.values ? { matrixValues: job.matrix.values } : {}),
    ...(job.matrix ? { fanoutIndex: job.matrix.index, fanoutTotal: job.matrix.total } : {}),
    agent: { labels: [...target.agentLabels] },
    ...environmentOf(source, lockJob.name, job.resolved?.environment),
    jobEnv: job.resolved?.env ?? source.resolvedEnv?.[lockJob.name] ?? staticEnv,
    ...(lockJob.timeout ? { timeout: lockJob.timeout } : {}),
    gracePeriod: lockJob.gracePeriod ?? 30,
    checkout: source.repoUrl !== null && lockJob.checkout !== false,
    runsOnPick: lockJob.runsOnPick ?? 'deterministic',
  };
}

/** The job's environment and its variables as the run froze them (ENV-4); an init job's name wins. */
function environmentOf(source: RunSource, jobName: string, resolved: string | undefined) {
  const frozen = source.environments;
  const name = resolved ?? (frozen && Object.hasOwn(frozen.byJob, jobName) ? frozen.byJob[jobName] : undefined);
  if (name === undefined) return { environmentVars: {} };
  const values = frozen && Object.hasOwn(frozen.values, name) ? frozen.values[name] : undefined;
  return { environment: name, environmentVars: { ...values?.variables } };
}

/** An init job evaluates its target's dynamic fields in the workflow's TypeScript (docs/lockfile.md#init-jobs). */
function initJobConfig(source: RunSource, init: InitTarget) {
  const { flags } = init;
  return {
    initOnly: true,
    targetJobName: init.targetJobName,
    workflowName: source.workflow.name,
    source: source.workflow.source?.file ?? '',
    dynamicEnvironment: flags.dynamicEnvironment,
    // Later agents name environments "contexts"; both spellings are sent so either reads its flag.
    dynamicContext: flags.dynamicEnvironment,
    dynamicEnv: flags.dynamicEnv,
    dynamicConcurrencyGroup: flags.dynamicConcurrencyGroup,
    dynamicMatrix: flags.dynamicMatrix,
    event: source.event ?? {},
    timeoutMs: INIT_JOB_TIMEOUT_MS,
    ...sourceIdentity(source.workflow),
  };
}

/** The platform a job's agent runs on, from the labels the stock agent declares (`kici:os:*`, `kici:arch:*`). */
export function platformOf(agentLabels: readonly string[]): { platform: string; arch: string } {
  const named = (prefix: string) => agentLabels.find((label) => label.startsWith(prefix))?.slice(prefix.length);
  return { platform: named('kici:os:') ?? 'linux', arch: named('kici:arch:') ?? 'x64' };
}

/**
 * The build job (docs/blobs.md#source-and-dependency-caches): clone, pack `.kici/` and its
 * dependencies, upload them. Both are asked for here; the dispatch is completed with what the
 * caches hold by the time it is sent (src/ws/dispatch-caches.ts).
 */
function buildJobConfig(source: RunSource, target: DispatchTarget) {
  const { platform, arch } = platformOf(target.agentLabels);
  return {
    buildOnly: true,
    workflowName: source.workflow.name,
    targetPlatform: platform,
    targetArch: arch,
    source: { file: source.workflow.source?.file ?? '' },
    ...sourceIdentity(source.workflow),
    ...(source.lockfileHash ? { lockfileHash: source.lockfileHash } : {}),
    buildSourceNeeded: true,
    buildDepsNeeded: source.lockfileHash !== undefined,
  };
}

/** A job's upstream results name the jobs of its workflow, never the build job every job waits for. */
function withoutBuild(upstream: DispatchTarget['job']['upstream']): DispatchTarget['job']['upstream'] {
  if (!upstream) return upstream;
  const keep = <T>(record: Record<string, T>) => Object.fromEntries(Object.entries(record).filter(([name]) => !isBuildJobKey(name)));
  return { ...upstream, statuses: keep(upstream.statuses), outputs: keep(upstream.outputs) };
}
