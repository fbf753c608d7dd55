import type { ApprovalDecision, EnvironmentHold } from './environment.ts';
import type { JobStatus, TerminalJobStatus } from './status.ts';
import type { AckHolderAnswer, CancelReport } from './job.withdrawal.ts';
import type {
  AgentRequirements,
  ConcurrencyPolicy,
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

/** Every event carries `at`: the time the host received it. Machines read time only from here. */
interface Timed {
  at: number;
}
interface FromAgent extends Timed {
  agentId: string;
  /** The wire `jobId` of one dispatch attempt (docs/protocol.md#jobdispatch). */
  dispatchId: string;
}
interface JobScoped {
  jobKey: string;
}

export type AgentKind = 'static' | 'scaler';

/** How a job came to wait for its agent: `reconnect` is a new socket of the agent before the old one was seen to close. */
export type RecoveryCause = 'coordinator_restart' | 'disconnect' | 'reconnect';

export type JobTimerEvent =
  | ({ type: 'timer.ack.expired' } & TimerFields)
  | ({ type: 'timer.lease.expired' } & TimerFields)
  | ({ type: 'timer.recovery.expired' } & TimerFields)
  | ({ type: 'timer.replay.expired' } & TimerFields)
  | ({ type: 'timer.queue.expired' } & TimerFields)
  | ({ type: 'timer.cancel.expired' } & TimerFields)
  | ({ type: 'timer.jobTimeout.expired' } & TimerFields)
  | ({ type: 'timer.approval.expired' } & TimerFields)
  | ({ type: 'timer.recheck.expired' } & TimerFields)
  | ({ type: 'timer.fence.expired' } & TimerFields);

export interface TimerFields extends Timed {
  deadlineId: string;
  /** The `at` the deadline was armed with; a renewed deadline makes an older firing stale. */
  dueAt: number;
}

/** A job-level concurrency group: its scoped key and the run's policy (CONC-1, CONC-2). */
export interface JobConcurrency {
  key: string;
  policy: ConcurrencyPolicy;
}

/** One step result of a terminal `job.status` (docs/protocol.md#status-handling). */
export interface StepResult {
  name: string;
  status: string;
  durationMs: number;
  error?: string;
}

/** What a terminal `job.status` reports besides its state. */
export interface JobStatusData {
  durationMs?: number;
  outputs?: JobOutputs;
  stepResults?: StepResult[];
  /** An init job's result (docs/lockfile.md#init-jobs); a failed init arrives as state `failed`. */
  initResult?: InitResult;
}

/** What the run hands a job it releases: its upstreams' results and values its init job resolved. */
export interface Release {
  upstream?: UpstreamResults;
  resolved?: ResolvedValues;
  concurrency?: JobConcurrency;
  /** Set when an init job named the environment: its hold (ENV-2), or null when it holds nothing. */
  hold?: EnvironmentHold | null;
}

/** Events a job actor accepts. The run actor forwards them by `jobKey`. */
export type JobEvent = (
  | ({ type: 'job.release' } & Release & Timed)
  | ({ type: 'job.init.failed'; failure: InitFailure } & Timed)
  /** A user decided the job's hold (docs/http-api.md#approvals). */
  | ({ type: 'job.approval' } & ApprovalDecision & Timed)
  | ({ type: 'job.gate'; reason: WaitingReason } & Timed)
  | ({ type: 'job.skip'; reason: string } & Timed)
  | ({ type: 'job.cancel.requested'; force: boolean; reason: string } & Timed)
  | ({ type: 'concurrency.granted' } & Timed)
  | ({ type: 'concurrency.queued'; position: number } & Timed)
  | ({ type: 'placement.granted'; agentId: string; dispatchId: string; agentKind: AgentKind } & Timed)
  | ({ type: 'placement.none'; reason: WaitingReason } & Timed)
  | ({ type: 'placement.refused'; message: string } & Timed)
  | ({ type: 'provision.failed'; message: string } & Timed)
  | ({ type: 'agent.job.ack' } & FromAgent)
  | ({ type: 'agent.job.reject'; reason: string } & FromAgent)
  | ({ type: 'agent.job.status'; state: JobStatus; error?: string; data?: JobStatusData } & FromAgent)
  | ({ type: 'agent.job.heartbeat' } & FromAgent)
  | ({ type: 'agent.step.status'; step: StepRecord } & FromAgent)
  /** `connectionId`: the agent's socket that reclaimed the attempt (absent in journals written before it was recorded). */
  | ({ type: 'agent.job.reclaim'; connectionId?: string } & FromAgent)
  /** The agent registered again without this attempt in `inFlightJobs`: its status was lost. */
  | ({ type: 'agent.job.lost' } & FromAgent)
  /**
   * `cause: 'coordinator'`: the socket went with a coordinator, not with the agent, which may come back.
   * `connectionId`: the socket that went, when known; one other than the socket that reclaimed the attempt is stale.
   */
  | ({ type: 'agent.disconnected'; agentId: string; cause?: 'agent' | 'coordinator'; connectionId?: string } & Timed)
  /**
   * From the run, once restored in a new process: `liveAgents` are the agents of its jobs that have a
   * session on a live coordinator. The job asks for placement again, or treats a gone agent as disconnected.
   */
  | ({ type: 'job.restored'; liveAgents: string[] } & Timed)
  /** The host's answer to `askAckHolder`: where the overdue attempt's agent has its socket (machines/job.withdrawal.ts). */
  | ({ type: 'ack.holder' } & AckHolderAnswer)
  /** The host carried out a withdrawn attempt's cancel: sent, left with a peer, or no socket anywhere. */
  | ({ type: 'cancel.reported' } & CancelReport)
  /** The host's answer to `checkCancelFence`: `lifted` once the cancel has gone out, or the agent is back. */
  | ({ type: 'fence.checked'; lifted: boolean } & Timed)
  | JobTimerEvent
) &
  Partial<JobScoped>;

export const JOB_EVENT_TYPES = [
  'job.gate',
  'job.approval',
  'job.skip',
  'job.cancel.requested',
  'concurrency.granted',
  'concurrency.queued',
  'placement.granted',
  'placement.none',
  'placement.refused',
  'provision.failed',
  'agent.job.ack',
  'agent.job.reject',
  'agent.job.status',
  'agent.job.heartbeat',
  'agent.step.status',
  'agent.job.reclaim',
  'agent.job.lost',
  'agent.disconnected',
  'timer.ack.expired',
  'timer.lease.expired',
  'timer.recovery.expired',
  'timer.replay.expired',
  'timer.queue.expired',
  'timer.cancel.expired',
  'timer.jobTimeout.expired',
  'timer.approval.expired',
  'timer.recheck.expired',
  'timer.fence.expired',
  'ack.holder',
  'cancel.reported',
  'fence.checked',
] as const satisfies readonly JobEvent['type'][];

/** Events a job actor sends to its run. */
export type JobReport =
  | { type: 'job.started'; jobKey: string; at: number }
  | {
      type: 'job.finished';
      jobKey: string;
      status: TerminalJobStatus;
      reason: string | null;
      at: number;
      outputs?: JobOutputs;
      initResult?: InitResult;
    };

export interface JobInput {
  runId: string;
  jobKey: string;
  baseName: string;
  requirements: AgentRequirements;
  timeouts: JobTimeouts;
  maxAttempts: number;
  /** Set when the job must wait for the run before anything else (needs, wave, approval). */
  gate: WaitingReason | null;
  concurrency: JobConcurrency | null;
  initFailure: InitFailure | null;
  createdAt: number;
  /** Set for an init job: the job it evaluates dynamic fields for (docs/lockfile.md#init-jobs). */
  initFor?: InitTarget | null;
  /** Set for a matrix child: its values and place in the fan-out (docs/lockfile.md#jobs). */
  matrix?: MatrixPlace | null;
  /** Its environment holds it for approval before placement (ENV-2). */
  hold?: EnvironmentHold | null;
}

export interface MatrixPlace {
  values: Record<string, string> | null;
  index: number;
  total: number;
}

export interface Assignment {
  agentId: string;
  dispatchId: string;
  agentKind: AgentKind;
  /**
   * The agent's socket that last reclaimed the attempt. The disconnect of an older socket can reach the
   * run after the reclaim (a peer's close goes through the run inbox): it no longer says the attempt is lost.
   */
  connectionId?: string;
  /** Why the attempt is recovering: the coordinator holding its socket restarted (or stopped), or the agent's socket closed or was replaced. */
  recovery?: RecoveryCause;
}

export interface ArmedDeadline {
  id: string;
  at: number;
}

export type ArmedDeadlines = Partial<Record<DeadlineKind, ArmedDeadline>>;
