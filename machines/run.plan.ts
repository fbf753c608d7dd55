import type { LockDynamicJob, LockNeed, LockStaticJob, LockStep, LockWorkflow } from './lock.types.ts';
import { expandStaticMatrix, matrixChildName } from './run.matrix.ts';
import type { MatrixCombination } from './run.matrix.ts';
import type { JobPlan, RunInput } from './run.types.ts';
import { verdictFor } from './environment.ts';
import type { EnvironmentVerdict } from './environment.ts';
import type {
  AgentRequirements,
  ConcurrencyPolicy,
  InitFailure,
  InitFailureCategory,
  InitFlags,
  JobTimeouts,
  LabelMatcher,
  NeedEdge,
  StepExecutor,
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
  /** The environment each job names and the frozen verdicts on them (ENV-2, ENV-4; src/pipeline/environments.ts). */
  environments?: PlannedEnvironments;
  /** A build job first (docs/blobs.md#source-and-dependency-caches): its workflow source is not cached yet. */
  build?: { contentHash: string };
}

export interface PlannedEnvironments {
  /** The environment a job names in the lock file, by job name (after inline evaluation). */
  byJob: Record<string, string>;
  /** Verdicts on the environments named, and on every environment when an init job may name one. */
  verdicts: Record<string, EnvironmentVerdict>;
}

/** @default 30 s, the KiCI default `gracePeriod`. */
const DEFAULT_GRACE_PERIOD_S = 30;
/** Extra time after SIGKILL before the orchestrator gives up on a cancelling agent. */
const CANCEL_BACKSTOP_MS = 30_000;
/** @default 24 h (RUN-4). */
const DEFAULT_APPROVAL_TIMEOUT_S = 86_400;
const MAX_INIT_FAILURE_MESSAGE = 2000;
const INIT_RUNNER_LABEL: LabelMatcher = { kind: 'exact', value: 'kici:role:init-runner' };
const BUILDER_LABEL: LabelMatcher = { kind: 'exact', value: 'kici:role:builder' };
/** The `timeoutMs` an init job's jobConfig carries (docs/lockfile.md#init-jobs). */
export const INIT_JOB_TIMEOUT_MS = 60_000;

/**
 * Turns one matched workflow into the frozen input of a run (RUN-1, RUN-3). Pure and total:
 * a problem with one job becomes that job's init failure, and planning never throws on a
 * lock file that passed validation.
 */
export function planRun(options: PlanRunOptions): RunInput {
  const { workflow } = options;
  const jobs = withBuild(
    workflow.jobs.flatMap((job) => (job._type === 'dynamic' ? [planGenerator(job, options)] : planStaticJob(job, options))),
    options,
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
    concurrencyScope: { repository: options.repository, policy: concurrencyPolicyOf(workflow) },
    ...(options.environments ? { environments: options.environments.verdicts } : {}),
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
  const flags = initFlagsOf(job);
  if (flags === null) return planTargets(job, options, {});
  const init = initPlan(job, flags, options);
  return [init, ...planTargets(job, options, { initJob: init.key })];
}

/** The plans of one job: one, its static matrix children, or a dynamic-matrix template. */
function planTargets(job: LockStaticJob, options: PlanRunOptions, extra: { initJob?: string }): JobPlan[] {
  if (!job.matrix) return [{ ...singlePlan(job, options, null), ...extra }];
  if (job.matrix._type === 'dynamic') return [{ ...singlePlan(job, options, null), ...extra, template: true }];
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
  const total = expansion.combinations.length;
  return expansion.combinations.map((values, index) => ({ ...childPlan(job, options, values, index, total), ...extra }));
}

/**
 * Fields only the job's own TypeScript can compute (an impure function stores no expression, or a
 * dynamic matrix): an init job evaluates them on a KiCI agent first (docs/lockfile.md#init-jobs).
 */
export function initFlagsOf(job: LockStaticJob): InitFlags | null {
  const flags: InitFlags = {
    dynamicEnvironment: job.environments?.some((ref) => ref.dynamic && ref.value === '') ?? false,
    dynamicEnv: job.dynamicEnv === true && job.env === undefined,
    dynamicConcurrencyGroup: job.dynamicConcurrencyGroup === true && job.concurrencyGroup === undefined,
    dynamicMatrix: job.matrix?._type === 'dynamic',
  };
  return Object.values(flags).some(Boolean) ? flags : null;
}

/** The build job's key, as the reference names it. */
export function buildJobKey(workflowName: string): string {
  return `${BUILD_JOB_PREFIX}${workflowName}`;
}

const BUILD_JOB_PREFIX = '__build__';

/** Whether a job key names a run's build job. */
export function isBuildJobKey(jobKey: string): boolean {
  return jobKey.startsWith(BUILD_JOB_PREFIX);
}

/**
 * The build job packs the workflow source and its dependencies once and uploads them; every job
 * that can run waits for it. Runs that need the same missing source build it once: their build jobs
 * share a group that queues (the later ones find the tarballs and only confirm them).
 */
function withBuild(jobs: JobPlan[], options: PlanRunOptions): JobPlan[] {
  if (!options.build) return jobs;
  const key = buildJobKey(options.workflow.name);
  const build: JobPlan = {
    ...kiciRunnerPlan(key, [BUILDER_LABEL], { ...options.timeouts }),
    concurrency: { key: `${options.repository}::${key}::${options.build.contentHash}`, policy: { cancelInProgress: false, max: 1 } },
  };
  const gated = jobs.map((job) => (job.initFailure === null ? { ...job, needs: [...job.needs, { name: key, runOn: ['success' as const] }] } : job));
  return [build, ...gated];
}

const INIT_JOB_PREFIX = '__init__';

export function initJobKey(workflowName: string, jobName: string): string {
  return `${INIT_JOB_PREFIX}${workflowName}__${jobName}`;
}

/** Whether a job key names an init job (`initJobKey`). */
export function isInitJobKey(jobKey: string): boolean {
  return jobKey.startsWith(INIT_JOB_PREFIX);
}

/** The lock-file job an init job of `workflowName` evaluates for, or null for any other key. */
export function initTargetOf(jobKey: string, workflowName: string): string | null {
  const prefix = initJobKey(workflowName, '');
  return jobKey.startsWith(prefix) ? jobKey.slice(prefix.length) : null;
}

/** The init job runs at once on a KiCI init runner of the target's platform (DAG-6). */
function initPlan(job: LockStaticJob, flags: InitFlags, options: PlanRunOptions): JobPlan {
  const key = initJobKey(options.workflow.name, job.name);
  const platform = (job.runsOn ?? []).filter((m) => m.kind === 'exact' && /^kici:(os|arch):/.test(m.value));
  return {
    ...kiciRunnerPlan(key, [INIT_RUNNER_LABEL, ...platform], { ...options.timeouts, jobTimeoutMs: INIT_JOB_TIMEOUT_MS }),
    initFor: { targetJobName: job.name, flags },
  };
}

/** A plan with no fan-out and no group, on a KiCI agent: the shape of init jobs and generators. */
function kiciRunnerPlan(key: string, runsOn: LabelMatcher[], timeouts: JobTimeouts): JobPlan {
  return {
    key,
    baseName: key,
    fanoutIndex: null,
    fanoutTotal: null,
    matrixValues: null,
    needs: [],
    maxParallel: null,
    failFast: false,
    requirements: { runsOn, excludeLabels: [], runsOnPick: 'deterministic', executor: 'kici' },
    timeouts,
    concurrency: null,
    initFailure: null,
  };
}

/** Reasons a job can never run, found before its matrix is looked at. */
function setupFailure(job: LockStaticJob, options: PlanRunOptions): InitFailure | null {
  if (job.runsOnAll) return initFailure(job.name, 'matrix_expansion', 'runsOnAll is not supported');
  const given = ownValue(options.jobErrors, job.name);
  if (given) return { ...given, scope: 'job', message: clip(given.message), jobName: job.name };
  const verdict = environmentVerdictOf(job, options);
  if (verdict?.kind === 'fail') return initFailure(job.name, 'environment_rules', `job ${job.name}: ${verdict.message}`);
  const inline = typeof job.concurrencyGroup === 'object';
  if (inline && ownValue(options.resolvedConcurrencyGroups, job.name) === undefined) {
    return initFailure(job.name, 'dynamic_eval', `the concurrency group expression of job ${job.name} was not evaluated`);
  }
  return null;
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
    ...holdOf(job, options),
  };
}

/** The verdict on the environment a job names in the lock file; null when it names none. */
function environmentVerdictOf(job: LockStaticJob, options: PlanRunOptions): EnvironmentVerdict | null {
  const name = ownValue(options.environments?.byJob, job.name);
  return name === undefined || !options.environments ? null : verdictFor(name, options.environments.verdicts);
}

function holdOf(job: LockStaticJob, options: PlanRunOptions): { hold?: NonNullable<JobPlan['hold']> } {
  const verdict = environmentVerdictOf(job, options);
  return verdict?.kind === 'hold' ? { hold: verdict.hold } : {};
}

function requirementsOf(job: LockStaticJob): AgentRequirements {
  return {
    runsOn: job.runsOn ?? [],
    excludeLabels: job.excludeLabels ?? [],
    runsOnPick: job.runsOnPick ?? 'deterministic',
    executor: executorOf(job.steps),
  };
}

/** A job with any `run` step goes to an agent that executes run steps; other steps are TypeScript (docs/lockfile.md#steps-and-the-run-extension). */
export function executorOf(steps: readonly LockStep[]): StepExecutor {
  if (steps.length === 0) return 'any';
  return steps.some(hasRunStep) ? 'run-steps' : 'kici';
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

/** A job generator (`dynamicJobFn`) adds jobs at run time; Switchyard does not run generators yet, so it fails. */
function planGenerator(job: LockDynamicJob, options: PlanRunOptions): JobPlan {
  const key = `__dynamic__${options.workflow.name}__${job.source.index}`;
  const group = job.group === undefined ? '' : ` of group ${job.group}`;
  const message = `job generator${group} in ${job.source.file} is not supported: Switchyard does not run job generators (dynamicJobFn) yet`;
  return { ...kiciRunnerPlan(key, [INIT_RUNNER_LABEL], { ...options.timeouts }), needs: needEdgesOf(job.needs), initFailure: initFailure(key, 'dynamic_eval', message) };
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
