import type { EnvironmentHold, EnvironmentVerdict } from './environment.ts';
import type { TerminalJobStatus } from './status.ts';
import type {
  AgentRequirements,
  ConcurrencyPolicy,
  InitFailure,
  InitResult,
  InitTarget,
  JobOutputs,
  JobTimeouts,
  NeedEdge,
  UpstreamResults,
  WaitingReason,
} from './types.ts';

/** One materialized job of a run (a matrix child is its own job), frozen at creation (RUN-3). */
export interface JobPlan {
  key: string;
  baseName: string;
  fanoutIndex: number | null;
  fanoutTotal: number | null;
  matrixValues: Record<string, string> | null;
  needs: NeedEdge[];
  maxParallel: number | null;
  failFast: boolean;
  requirements: AgentRequirements;
  timeouts: JobTimeouts;
  concurrency: { key: string; policy: ConcurrencyPolicy } | null;
  initFailure: InitFailure | null;
  /** The init job that evaluates this job's dynamic fields first (docs/lockfile.md#init-jobs, DAG-6). */
  initJob?: string;
  /** A dynamic-matrix job: a template with no actor until its init job's result fans it out. */
  template?: boolean;
  /** Set on an init job: the job it evaluates for. */
  initFor?: InitTarget;
  /** Its environment holds it for approval before placement (ENV-2). */
  hold?: EnvironmentHold;
}

/** How a concurrency group resolved at run time is scoped and governed (CONC-1, CONC-2). */
export interface ConcurrencyScope {
  repository: string;
  policy: ConcurrencyPolicy;
}

export interface RunInput {
  runId: string;
  createdAt: number;
  workflowName: string;
  jobs: JobPlan[];
  workflowTimeoutMs: number | null;
  /** A workflow approval holds the run before any job (RUN-4). */
  approval: { timeoutMs: number } | null;
  /** A run-scope init failure: the run fails at once and never dispatches (INIT-2). */
  initFailure: InitFailure | null;
  maxAttempts: number;
  /** For job-level groups an init job resolves; absent when the run has none. */
  concurrencyScope?: ConcurrencyScope;
  /**
   * Verdicts on every environment an init job may name, frozen at creation (ENV-4); a name missing
   * here fails its job with `environment_rules`. Absent: names from init jobs are not checked.
   */
  environments?: Record<string, EnvironmentVerdict>;
  /** Report the run's status to its forge under this context (a GitHub commit status); absent or null: none. */
  forgeStatus?: { context: string } | null;
  /**
   * A failed-only rerun: jobs that succeeded in the original run, by key, ended before the run starts
   * with their outputs, so their dependants see them as upstreams (docs/http-api.md#rerun).
   */
  carried?: Record<string, CarriedJob>;
}

/** A job of an earlier run that a failed-only rerun keeps as it ended. */
export interface CarriedJob {
  fromRun: string;
  outputs?: JobOutputs;
}

/** The run's view of one job: enough to evaluate needs, waves and completion. */
export interface RunJobNode {
  baseName: string;
  fanoutIndex: number | null;
  needs: NeedEdge[];
  /** Terminal status once the job reported it; null while it runs or waits. */
  status: TerminalJobStatus | null;
  /** The run has released or skipped this job: its gate is decided and never re-sent. */
  decided: boolean;
  /** The reason last sent to the job while it waits on the run. */
  gate: WaitingReason | null;
  /** The init job this job waits for (DAG-6). */
  initJob?: string;
  /** A dynamic-matrix template: no actor; replaced by its children when its init job succeeds. */
  template?: boolean;
  /** Kept from the job's `job.finished`: outputs go downstream (DAG-4), an init result to its target. */
  outputs?: JobOutputs;
  initResult?: InitResult;
  reason?: string;
  /** Why a job with no actor (a template) failed. */
  failure?: InitFailure;
}

export interface FanoutGroup {
  children: string[];
  maxParallel: number | null;
  failFast: boolean;
  halted: boolean;
}

/** What the run sends to a job after evaluating its graph. */
export type GateDecision =
  | { jobKey: string; kind: 'release'; upstream: UpstreamResults | null; init: InitResult | null }
  | { jobKey: string; kind: 'skip'; reason: string }
  | { jobKey: string; kind: 'gate'; reason: WaitingReason }
  /** Its init job did not succeed: the job fails with `dynamic_eval` (DAG-6). */
  | { jobKey: string; kind: 'fail'; failure: InitFailure }
  /** A template whose init job succeeded: fan it out. */
  | { jobKey: string; kind: 'expand'; init: InitResult };
