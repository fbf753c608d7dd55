import type { LockDynamicJob, LockNeed, LockStaticJob, LockStep, LockWorkflow } from './lock.types.ts';
import { expandStaticMatrix, matrixChildName } from './run.matrix.ts';
import type { MatrixCombination } from './run.matrix.ts';
import type { JobPlan, RunInput } from './run.types.ts';
import type {
  AgentRequirements,
  ConcurrencyPolicy,
  InitFailure,
  InitFailureCategory,
  JobTimeouts,
  LabelMatcher,
  NeedEdge,
} from './types.ts';

export interface PlanRunOptions {
  runId: string;
  createdAt: number;
  workflow: LockWorkflow;
  /** Defaults from configuration; a job's own `timeout` and `gracePeriod` override them. */
  timeouts: JobTimeouts;
  maxAttempts: number;
  /** Repository full name; it scopes every concurrency key (CONC-1). */
  repository: string;
  /** Results of inline `concurrencyGroup` expressions, by job name, evaluated before planning. */
  resolvedConcurrencyGroups?: Record<string, string>;
  /** Inline evaluation failures, by job name; each fails that job only. */
  jobErrors?: Record<string, InitFailure>;
  /** A run-scope failure found before planning; the run fails at once (INIT-2). */
  initFailure?: InitFailure;
}

/** @default 30 s, the KiCI default `gracePeriod`. */
const DEFAULT_GRACE_PERIOD_S = 30;
/** Extra time after SIGKILL before the orchestrator gives up on a cancelling agent. */
const CANCEL_BACKSTOP_MS = 30_000;
/** @default 24 h (RUN-4). */
const DEFAULT_APPROVAL_TIMEOUT_S = 86_400;
const MAX_INIT_FAILURE_MESSAGE = 2000;
const INIT_RUNNER_LABEL: LabelMatcher = { kind: 'exact', value: 'kici:role:init-runner' };

/**
 * Turns one matched workflow into the frozen input of a run (RUN-1, RUN-3). Pure and total:
 * a problem with one job becomes that job's init failure, and planning never throws on a
 * lock file that passed validation.
 */
export function planRun(options: PlanRunOptions): RunInput {
  const { workflow } = options;
  const jobs = workflow.jobs.flatMap((job) =>
    job._type === 'dynamic' ? [planGenerator(job, options)] : planStaticJob(job, options),
  );
  return {
    runId: options.runId,
    createdAt: options.createdAt,
    workflowName: workflow.name,
    jobs,
    workflowTimeoutMs: workflow.timeout ?? null,
    approval: workflow.approval
      ? { timeoutMs: (workflow.approval.timeoutSeconds ?? DEFAULT_APPROVAL_TIMEOUT_S) * 1000 }
      : null,
    initFailure: options.initFailure ?? null,
    maxAttempts: options.maxAttempts,
  };
}

/** Policy of every concurrency group of the run (CONC-2). */
export function concurrencyPolicyOf(workflow: LockWorkflow): ConcurrencyPolicy {
  return {
    cancelInProgress: workflow.concurrency?.cancelInProgress ?? true,
    max: workflow.concurrency?.max ?? 1,
  };
}

/** Needs as edges on base names; a string needs `success`. */
export function needEdgesOf(needs: readonly LockNeed[] | undefined): NeedEdge[] {
  return (needs ?? []).flatMap((need): NeedEdge[] => {
    if (typeof need === 'string') return [{ name: need, runOn: ['success'] }];
    if ('name' in need) return [{ name: need.name, runOn: [...need.runOn] }];
    // v1 runs no generator, so every group stays empty, and an empty group is satisfied at once (DAG-5).
    return [];
  });
}

function planStaticJob(job: LockStaticJob, options: PlanRunOptions): JobPlan[] {
  const failure = setupFailure(job, options);
  if (failure) return [singlePlan(job, options, failure)];
  if (!job.matrix) return [singlePlan(job, options, null)];
  if (job.matrix._type === 'dynamic') {
    const message = needsInitJob(options.workflow, job.name, `the matrix (computed in ${job.matrix.source.file})`);
    return [singlePlan(job, options, initFailure(job.name, 'dynamic_eval', message))];
  }
  const expansion = expandStaticMatrix({ matrix: job.matrix, include: job.include, exclude: job.exclude });
  if (!expansion.ok) {
    return [singlePlan(job, options, initFailure(job.name, 'matrix_expansion', `job ${job.name}: ${expansion.message}`))];
  }
  const keys = expansion.combinations.map((values) => matrixChildName(job.name, values));
  const clash = keys.find((key, index) => keys.indexOf(key) !== index);
  if (clash !== undefined) {
    const message = `job ${job.name}: two matrix combinations have the same child name ${clash}`;
    return [singlePlan(job, options, initFailure(job.name, 'matrix_expansion', message))];
  }
  return expansion.combinations.map((values, index) => childPlan(job, options, values, index, expansion.combinations.length));
}

/** Reasons a job can never run, found before its matrix is looked at. */
function setupFailure(job: LockStaticJob, options: PlanRunOptions): InitFailure | null {
  const { workflow } = options;
  if (job.runsOnAll) return initFailure(job.name, 'matrix_expansion', 'runsOnAll is not supported');
  const impure = impureField(job);
  if (impure) return initFailure(job.name, 'dynamic_eval', needsInitJob(workflow, job.name, impure));
  const given = ownValue(options.jobErrors, job.name);
  if (given) return { ...given, scope: 'job', message: clip(given.message), jobName: job.name };
  const inline = typeof job.concurrencyGroup === 'object';
  if (inline && ownValue(options.resolvedConcurrencyGroups, job.name) === undefined) {
    return initFailure(job.name, 'dynamic_eval', `the concurrency group expression of job ${job.name} was not evaluated`);
  }
  return null;
}

/** A field whose function is impure: the lock file stores no expression for Switchyard to evaluate. */
function impureField(job: LockStaticJob): string | null {
  if (job.dynamicConcurrencyGroup && job.concurrencyGroup === undefined) return 'the concurrency group';
  if (job.dynamicEnv && job.env === undefined) return 'the environment variables';
  if (job.environments?.some((ref) => ref.dynamic && ref.value === '')) return 'the environment name';
  return null;
}

function needsInitJob(workflow: LockWorkflow, jobName: string, what: string): string {
  return `${what} of job ${jobName} needs an init job (__init__${workflow.name}__${jobName}), which Switchyard v1 does not run`;
}

function singlePlan(job: LockStaticJob, options: PlanRunOptions, failure: InitFailure | null): JobPlan {
  return {
    ...sharedPlan(job, options, failure === null),
    key: job.name,
    fanoutIndex: null,
    fanoutTotal: null,
    matrixValues: null,
    initFailure: failure,
  };
}

function childPlan(job: LockStaticJob, options: PlanRunOptions, values: MatrixCombination, index: number, total: number): JobPlan {
  return {
    ...sharedPlan(job, options, true),
    key: matrixChildName(job.name, values),
    fanoutIndex: index,
    fanoutTotal: total,
    matrixValues: { ...values },
    initFailure: null,
  };
}

/** What every plan of one lock-file job has in common; a job that never runs holds no group. */
function sharedPlan(job: LockStaticJob, options: PlanRunOptions, runnable: boolean) {
  return {
    baseName: job.name,
    needs: needEdgesOf(job.needs),
    maxParallel: job.maxParallel ?? null,
    failFast: job.failFast ?? false,
    requirements: requirementsOf(job),
    timeouts: timeoutsOf(job, options.timeouts),
    concurrency: runnable ? concurrencyOf(job, options) : null,
  };
}

function requirementsOf(job: LockStaticJob): AgentRequirements {
  return {
    runsOn: job.runsOn ?? [],
    excludeLabels: job.excludeLabels ?? [],
    runsOnPick: job.runsOnPick ?? 'deterministic',
    runSteps: job.steps.some(hasRunStep),
  };
}

function hasRunStep(step: LockStep): boolean {
  return step.kind === 'parallel' ? step.children.some(hasRunStep) : step.run !== undefined;
}

function timeoutsOf(job: LockStaticJob, defaults: JobTimeouts): JobTimeouts {
  return {
    ...defaults,
    jobTimeoutMs: job.timeout ?? defaults.jobTimeoutMs,
    cancelGraceMs: (job.gracePeriod ?? DEFAULT_GRACE_PERIOD_S) * 1000 + CANCEL_BACKSTOP_MS,
  };
}

/** Job-level group (CONC-1): a string, or the inline result; an empty key means no group. */
function concurrencyOf(job: LockStaticJob, options: PlanRunOptions): JobPlan['concurrency'] {
  const group = job.concurrencyGroup;
  const key = typeof group === 'string' ? group : group ? ownValue(options.resolvedConcurrencyGroups, job.name) : undefined;
  if (!key) return null;
  return { key: `${options.repository}::${key}`, policy: concurrencyPolicyOf(options.workflow) };
}

/** A job generator is evaluated by an init job; v1 runs none, so it fails and adds no jobs. */
function planGenerator(job: LockDynamicJob, options: PlanRunOptions): JobPlan {
  const key = `__dynamic__${options.workflow.name}__${job.source.index}`;
  const group = job.group === undefined ? '' : ` of group ${job.group}`;
  const message = `job generator${group} in ${job.source.file} needs an init job, which Switchyard v1 does not run`;
  return {
    key,
    baseName: key,
    fanoutIndex: null,
    fanoutTotal: null,
    matrixValues: null,
    needs: needEdgesOf(job.needs),
    maxParallel: null,
    failFast: false,
    requirements: { runsOn: [INIT_RUNNER_LABEL], excludeLabels: [], runsOnPick: 'deterministic', runSteps: false },
    timeouts: { ...options.timeouts },
    concurrency: null,
    initFailure: initFailure(key, 'dynamic_eval', message),
  };
}

function initFailure(jobName: string, category: InitFailureCategory, message: string): InitFailure {
  return { scope: 'job', category, message: clip(message), jobName };
}

function clip(message: string): string {
  return message.length <= MAX_INIT_FAILURE_MESSAGE ? message : `${message.slice(0, MAX_INIT_FAILURE_MESSAGE - 1)}…`;
}

/** Own entries only: a job named `constructor` must not read Object.prototype. */
function ownValue<T>(record: Record<string, T> | undefined, key: string): T | undefined {
  return record !== undefined && Object.hasOwn(record, key) ? record[key] : undefined;
}
