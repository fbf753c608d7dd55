import type { TerminalJobStatus } from './status.ts';

/** A label matcher as written in the lock file (lockfile.md §5). */
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
  | 'scaler_failed';

export interface WaitingReason {
  kind: WaitingReasonKind;
  message: string;
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

/** "Never executed a step" (orchestration.md §13). */
export interface InitFailure {
  scope: 'run' | 'job';
  category: InitFailureCategory;
  message: string;
  jobName?: string;
}

/** What an agent must offer to take a job (protocol.md §6). */
export interface AgentRequirements {
  runsOn: LabelMatcher[];
  excludeLabels: LabelMatcher[];
  runsOnPick: 'deterministic' | 'any';
  runSteps: boolean;
}

/** Timeouts frozen into a job at run creation (DSP-3); all in milliseconds. */
export interface JobTimeouts {
  ackMs: number;
  leaseMs: number;
  recoveryMs: number;
  /** 0 means a queued job never expires. */
  queueMs: number;
  cancelGraceMs: number;
  /** Agent-enforced job timeout; the backstop adds the grace period and 60 s. */
  jobTimeoutMs: number | null;
}

export const DEFAULT_JOB_TIMEOUTS: JobTimeouts = {
  ackMs: 10_000,
  leaseMs: 2 * 60_000,
  recoveryMs: 120_000,
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

/** A durable deadline as the machines arm it; the host stores and fires it (DESIGN.md §4). */
export interface DeadlineSpec {
  id: string;
  kind: DeadlineKind;
  at: number;
  jobKey?: string;
}

export type DeadlineKind =
  | 'ack'
  | 'lease'
  | 'recovery'
  | 'queue'
  | 'cancel'
  | 'jobTimeout'
  | 'workflow'
  | 'approval';
