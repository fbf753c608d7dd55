import type { TerminalJobStatus } from './status.ts';

/** A label matcher as written in the lock file (docs/lockfile.md#jobs). */
export type LabelMatcher = { kind: 'exact'; value: string } | { kind: 'regex'; source: string; flags: string };

/** Why a job is not running yet (G-5). `message` is what a user reads. */
export type WaitingReasonKind =
  | 'needs'
  | 'wave'
  | 'concurrency'
  | 'approval'
  | 'environment'
  | 'no_matching_agent'
  | 'capacity'
  | 'scaler_spawning'
  | 'scaler_failed'
  | 'previous_attempt';

export interface WaitingReason {
  kind: WaitingReasonKind;
  message: string;
  /** For a hold (`approval`): the gate a user decides, its environment and when it expires. */
  gateId?: string;
  environment?: string;
  expiresAt?: number;
}

export const INIT_FAILURE_CATEGORIES = [
  'lock_resolution',
  'secret_resolution',
  'install_secrets',
  'build_coordination',
  'environment_rules',
  'dynamic_eval',
  'no_agent',
  'matrix_expansion',
] as const;
export type InitFailureCategory = (typeof INIT_FAILURE_CATEGORIES)[number];

/** "Never executed a step" (docs/architecture.md#init-jobs-and-dynamic-fan-out). */
export interface InitFailure {
  scope: 'run' | 'job';
  category: InitFailureCategory;
  message: string;
  jobName?: string;
}

/**
 * Which kind of agent can execute a job's steps: `run-steps` (shell `run:` steps, the reference
 * agent), `kici` (TypeScript steps and init jobs, the KiCI agent) or `any` (a job without steps).
 */
export type StepExecutor = 'run-steps' | 'kici' | 'any';

/** What an agent must offer to take a job (docs/protocol.md#labels-executors-and-matching). */
export interface AgentRequirements {
  runsOn: LabelMatcher[];
  excludeLabels: LabelMatcher[];
  runsOnPick: 'deterministic' | 'any';
  executor: StepExecutor;
}

/** Timeouts frozen into a job at run creation (DSP-3); all in milliseconds. */
export interface JobTimeouts {
  ackMs: number;
  leaseMs: number;
  recoveryMs: number;
  /**
   * How long an agent that registered again without the attempt has to replay a status it kept while
   * disconnected; absent in jobs created before it existed. @default 10000
   */
  replayMs?: number;
  /** 0 means a queued job never expires. */
  queueMs: number;
  cancelGraceMs: number;
  /** Agent-enforced job timeout; the backstop adds the grace period and 60 s. */
  jobTimeoutMs: number | null;
}

/** `JobTimeouts.replayMs` when a job has none. */
export const DEFAULT_REPLAY_MS = 10_000;

export const DEFAULT_JOB_TIMEOUTS: JobTimeouts = {
  ackMs: 10_000,
  leaseMs: 2 * 60_000,
  recoveryMs: 120_000,
  replayMs: DEFAULT_REPLAY_MS,
  queueMs: 60 * 60_000,
  cancelGraceMs: 30_000 + 30_000,
  jobTimeoutMs: null,
};

export const MAX_DISPATCH_ATTEMPTS = 5;

/** Concurrency policy frozen into the run (CONC-2). */
export interface ConcurrencyPolicy {
  cancelInProgress: boolean;
  max: number;
}

export interface NeedEdge {
  /** Base job name of the upstream (a fan-out is needed as a whole). */
  name: string;
  runOn: TerminalJobStatus[];
}

/** A durable deadline as the machines arm it; the host stores and fires it (docs/architecture.md#time-durable-deadlines). */
export interface DeadlineSpec {
  id: string;
  kind: DeadlineKind;
  at: number;
  jobKey?: string;
}

/** Every kind of deadline the charts arm; the timer service fires `timer.<kind>.expired`. */
export const DEADLINE_KINDS = ['ack', 'lease', 'recovery', 'replay', 'queue', 'cancel', 'jobTimeout', 'workflow', 'approval', 'recheck', 'fence'] as const;
export type DeadlineKind = (typeof DEADLINE_KINDS)[number];

export function isDeadlineKind(kind: string): kind is DeadlineKind {
  return (DEADLINE_KINDS as readonly string[]).includes(kind);
}

/** `step.status.state` (docs/protocol.md#status-handling); `pending`/`cancelled` are for parallel-group children. */
export const STEP_STATES = ['running', 'success', 'failed', 'skipped', 'pending', 'cancelled'] as const;
export type StepState = (typeof STEP_STATES)[number];

/** One step of the current attempt, as the agent last reported it. */
export interface StepRecord {
  /** Position in the flattened step list; hook steps come after the last step. */
  index: number;
  name: string;
  status: StepState;
  /** `hook:onFailure`, `hook:cleanup`, … for hook steps; null for ordinary steps. */
  hook: string | null;
  durationMs: number | null;
  exitCode: number | null;
  error: string | null;
}

/** A finished job's step outputs, `{step: value}` (DAG-4). */
export type JobOutputs = Record<string, unknown>;

/** The direct upstreams of a job as its dispatch carries them: child names and aggregated base names (DAG-4). */
export interface UpstreamResults {
  statuses: Record<string, TerminalJobStatus>;
  outputs: Record<string, JobOutputs>;
}

/** Which fields of its target an init job evaluates (docs/lockfile.md#init-jobs). */
export interface InitFlags {
  dynamicEnvironment: boolean;
  dynamicEnv: boolean;
  dynamicConcurrencyGroup: boolean;
  dynamicMatrix: boolean;
}

/** An init job's target and what it evaluates for it. */
export interface InitTarget {
  targetJobName: string;
  flags: InitFlags;
}

/** What an init job resolved for its target; matrix values are combinations with values as text. */
export interface InitResult {
  environmentNames?: string[];
  env?: Record<string, string>;
  concurrencyGroup?: string;
  matrixValues?: Record<string, string>[];
}

/** Values an init job resolved, applied to a job before its dispatch. */
export interface ResolvedValues {
  env?: Record<string, string>;
  environment?: string;
}
