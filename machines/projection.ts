import type { StateValue } from 'xstate';
import { jobMachine } from './job.machine.ts';
import type { JobContext } from './job.setup.ts';
import { runMachine } from './run.machine.ts';
import type { RunContext } from './run.machine.ts';
import { jobStatusOfTags, runStatusOfTags } from './status.ts';
import type { JobStatus, RunStatus } from './status.ts';
import type { InitFailure, JobOutputs, StepRecord, WaitingReason } from './types.ts';

/** The JSON shape `getPersistedSnapshot()` produces for a machine actor. */
export interface PersistedMachineSnapshot<TContext> {
  status: 'active' | 'done' | 'error' | 'stopped';
  value: unknown;
  context: TContext;
  children?: Record<string, { snapshot: PersistedMachineSnapshot<unknown>; src: string }>;
}

export interface RunProjection {
  status: RunStatus;
  workflowName: string;
  createdAt: number;
  finishedAt: number | null;
  failureReason: string | null;
  initFailure: InitFailure | null;
}

export interface JobProjection {
  jobKey: string;
  status: JobStatus;
  waitingReason: WaitingReason | null;
  attempt: number;
  agentId: string | null;
  dispatchId: string | null;
  outcome: string | null;
  initFailure: InitFailure | null;
  steps: StepRecord[];
  durationMs: number | null;
  outputs: JobOutputs | null;
  /** When the job last entered each status (`pending`: its creation); null for a job with no actor. */
  times: Record<string, number> | null;
}

/** A run's row, from a stored snapshot, or from the live one, whose tags need no resolving. */
export function projectRun(snapshot: { value: unknown; context: RunContext; tags?: ReadonlySet<string> }): RunProjection {
  const { context } = snapshot;
  return {
    status: snapshot.tags instanceof Set ? (runStatusOfTags(snapshot.tags) ?? 'pending') : runStatusOf(snapshot),
    workflowName: context.spec.workflowName,
    createdAt: context.spec.createdAt,
    finishedAt: context.finishedAt,
    failureReason: context.failureReason,
    initFailure: context.initFailure,
  };
}

/** The status a run's chart tags its state with; a stored snapshot is resolved against the chart first. */
export function runStatusOf(run: { value: unknown; context: RunContext }): RunStatus {
  const snapshot = runMachine.resolveState({ value: run.value as StateValue, context: run.context });
  return runStatusOfTags(snapshot.tags) ?? 'pending';
}

/** The status a job's chart tags its state with (STAT-3); a stored snapshot is resolved against the chart first. */
export function jobStatusOf(job: { value: unknown; context: JobContext; tags?: ReadonlySet<string> }): JobStatus {
  if (job.tags instanceof Set) return jobStatusOfTags(job.tags) ?? 'pending';
  const snapshot = jobMachine.resolveState({ value: job.value as StateValue, context: job.context });
  return jobStatusOfTags(snapshot.tags) ?? 'pending';
}

/** A job's state as projected: a stored snapshot, or a live one (with its tags). */
export interface JobStateView {
  value: unknown;
  context: JobContext;
  tags?: ReadonlySet<string>;
}

export function projectJobs(snapshot: PersistedMachineSnapshot<RunContext>, wanted?: (jobKey: string) => boolean): JobProjection[] {
  const children = snapshot.children ?? {};
  return projectJobsOf(snapshot.context, (jobKey) => children[jobKey]?.snapshot as PersistedMachineSnapshot<JobContext> | undefined, wanted);
}

/**
 * Each job's row, from the run's context and each job actor's state (`childOf`, undefined for a job
 * with no actor). `wanted` leaves out the jobs with an actor it refuses.
 */
export function projectJobsOf(
  runContext: RunContext,
  childOf: (jobKey: string) => JobStateView | undefined,
  wanted: (jobKey: string, child: JobStateView) => boolean = () => true,
): JobProjection[] {
  const jobs: JobProjection[] = [];
  for (const [jobKey, node] of Object.entries(runContext.jobs)) {
    const child = childOf(jobKey);
    if (child === undefined || wanted(jobKey, child)) jobs.push(projectJob(runContext, jobKey, node, child));
  }
  return jobs;
}

function projectJob(runContext: RunContext, jobKey: string, node: RunContext['jobs'][string], child: JobStateView | undefined): JobProjection {
  if (!child) {
    // A job with no actor: the run failed before spawning it, or a dynamic-matrix template.
    const status: JobStatus = node.status ?? 'pending';
    const runFailure = runContext.initFailure ? { ...runContext.initFailure, jobName: jobKey } : null;
    const initFailure = node.failure ?? runFailure;
    const noResult = { steps: [], durationMs: null, outputs: node.outputs ?? null, times: null };
    return { jobKey, status, waitingReason: node.gate, attempt: 0, agentId: null, dispatchId: null, outcome: node.reason ?? null, initFailure, ...noResult };
  }
  const { context } = child;
  return {
    jobKey,
    status: jobStatusOf(child),
    waitingReason: context.waiting,
    attempt: context.attempt,
    agentId: context.assignment?.agentId ?? null,
    dispatchId: context.assignment?.dispatchId ?? null,
    outcome: context.outcome,
    initFailure: context.initFailure,
    steps: context.steps,
    durationMs: context.result?.durationMs ?? null,
    outputs: context.result?.outputs ?? null,
    times: context.enteredAt,
  };
}

/** A compact picture of where the run and each job stand, journaled with every event for replay checks. */
export function stateSummary(snapshot: PersistedMachineSnapshot<RunContext>): { run: unknown; jobs: Record<string, unknown> } {
  const jobs: Record<string, unknown> = {};
  for (const [key, child] of Object.entries(snapshot.children ?? {})) jobs[key] = child.snapshot.value;
  return { run: snapshot.value, jobs };
}
