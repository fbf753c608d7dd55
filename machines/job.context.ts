import type { ArmedDeadlines, Assignment, JobConcurrency, MatrixPlace } from './job.events.ts';
import type { ApprovalGate, EnvironmentHold } from './environment.ts';
import type {
  AgentRequirements,
  DeadlineKind,
  InitFailure,
  InitResult,
  InitTarget,
  JobOutputs,
  JobTimeouts,
  ResolvedValues,
  StepRecord,
  UpstreamResults,
  WaitingReason,
} from './types.ts';
import { DEFAULT_REPLAY_MS } from './types.ts';
import type { Withdrawal } from './job.withdrawal.ts';

/** What a job is, fixed when it is created. */
export interface JobSpec {
  runId: string;
  jobKey: string;
  baseName: string;
  matrix: MatrixPlace | null;
  createdAt: number;
  requirements: AgentRequirements;
  timeouts: JobTimeouts;
  maxAttempts: number;
  /** Set for an init job: the job it evaluates dynamic fields for. */
  initFor: InitTarget | null;
}

/**
 * What a job actor keeps (machines/job.machine.ts), and the times it arms its deadlines for. What is
 * fixed at creation is grouped in `spec`: every `assign` copies the context's top-level keys, and V8
 * keeps an object of more than 19 keys copied so as a dictionary, which made each copy ~100 times
 * slower (test/unit/machines/context-memory.test.ts checks the layout).
 */
export interface JobContext {
  spec: JobSpec;
  concurrency: JobConcurrency | null;
  holdsConcurrency: boolean;
  /** What the run handed over on release: upstream results and init-resolved values (DAG-4). */
  upstream: UpstreamResults | null;
  resolved: ResolvedValues | null;
  /** Its environment holds it for approval before placement (ENV-2); the gate once opened. */
  hold: EnvironmentHold | null;
  approval: ApprovalGate | null;
  /** Steps of the current attempt as the agent reported them. */
  steps: StepRecord[];
  /** What the agent's terminal `job.status` reported. */
  result: JobResult | null;
  /** Dispatch attempts made so far; a new attempt starts on every `placement.granted`. */
  attempt: number;
  assignment: Assignment | null;
  waiting: WaitingReason | null;
  lastProvisioningError: string | null;
  deadlines: ArmedDeadlines;
  initFailure: InitFailure | null;
  /** Why the job ended where it did, in words a user reads. */
  outcome: string | null;
  /** Time of the last entry into each projected status (DSP-1). */
  enteredAt: Record<string, number>;
  /** A withdrawn attempt whose cancel the job waits for (state `withdrawing`); absent in jobs stored before it existed. */
  withdrawal?: Withdrawal | null;
}

export interface JobResult {
  durationMs: number | null;
  outputs: JobOutputs | null;
  initResult: InitResult | null;
}

/** Deadlines armed a timeout after now; the approval deadline's time is its gate's, and `recheck`/`fence` are timed by the host's answers. */
export type TimerKind = Exclude<DeadlineKind, 'workflow' | 'approval' | 'recheck' | 'fence'>;
/** Deadlines a job arms. */
export type JobDeadlineKind = Exclude<DeadlineKind, 'workflow'>;

const STALE_BACKSTOP_MS = 60_000;
/** The cancel deadline is `gracePeriod` + 30 s (DSP-3); the backstop adds `gracePeriod` itself. */
const CANCEL_MARGIN_MS = 30_000;

export function deadlineAt(context: JobContext, kind: TimerKind, now: number): number {
  const t = context.spec.timeouts;
  switch (kind) {
    case 'ack':
      return now + t.ackMs;
    case 'lease':
      return now + t.leaseMs;
    case 'recovery':
      return now + t.recoveryMs;
    case 'replay':
      return now + (t.replayMs ?? DEFAULT_REPLAY_MS);
    case 'queue':
      return now + t.queueMs;
    case 'cancel':
      return now + t.cancelGraceMs;
    case 'jobTimeout':
      return now + (t.jobTimeoutMs ?? 0) + (t.cancelGraceMs - CANCEL_MARGIN_MS) + STALE_BACKSTOP_MS;
  }
}

/**
 * `enteredAt` with `status` stamped, copied key by key onto a new object. A spread copy
 * (`{ ...enteredAt, [status]: at }`) gave every job's record a hidden class of its own in a
 * running coordinator (0.2 KB of each live job); this copy shares one (test/unit/machines/context-memory.test.ts).
 */
export function stamped(enteredAt: Record<string, number>, status: string, at: number): Record<string, number> {
  const copy: Record<string, number> = {};
  for (const key in enteredAt) copy[key] = enteredAt[key] as number;
  copy[status] = at;
  return copy;
}

/** The host stamps every event with `at`; only xstate.init has none, and it happens at creation. */
export function timeOf(context: JobContext, event: { at?: number }): number {
  return typeof event.at === 'number' ? event.at : context.spec.createdAt;
}
