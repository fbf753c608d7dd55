import { randomUUID } from 'node:crypto';
import type {
  AgentMessage,
  ApprovalRequest,
  JobDispatch,
  JobStatusMessage,
  SequentialStep,
  StepError,
  StepStatusData,
  TerminalStepState,
  WireStepState,
} from '../ws/messages.ts';
import type { Env } from './environment.ts';
import type { LogStreamOptions } from './log-stream.ts';
import type { SecretMasker } from './masking.ts';

export type ApprovalOutcome = 'approved' | 'rejected' | 'expired';

/** How a job talks to the coordinator; each method is one send path of the outbox. */
export interface JobChannel {
  direct(message: AgentMessage): void;
  buffered(message: AgentMessage): void;
  terminal(message: JobStatusMessage): void;
  /** Resolves `rejected` when the connection is lost while waiting (docs/protocol.md#facts-about-the-stock-agent-that-switchyard-lives-with). */
  requestApproval(request: ApprovalRequest): Promise<ApprovalOutcome>;
}

/** A step with its index in the flattened order the wire uses (docs/lockfile.md#steps-and-the-run-extension). */
export interface PlannedStep {
  index: number;
  step: SequentialStep;
}

export interface StepOutcome {
  index: number;
  name: string;
  state: TerminalStepState;
  durationMs: number;
  continueOnError: boolean;
  error?: StepError;
}

/** What one running job shares with its steps. */
export interface JobScope {
  dispatch: JobDispatch;
  channel: JobChannel;
  masker: SecretMasker;
  baseEnv: Env;
  checkoutDir: string;
  /** SIGTERM → SIGKILL delay for step timeouts and graceful stops. */
  graceMs: number;
  logOptions: LogStreamOptions;
  trackProcessGroup(pgid: number): void;
}

export function sendStepStatus(
  scope: JobScope,
  planned: PlannedStep,
  state: WireStepState,
  data?: StepStatusData,
): void {
  const { runId, jobId } = scope.dispatch;
  scope.channel.buffered({
    type: 'step.status',
    messageId: randomUUID(),
    runId,
    jobId,
    stepIndex: planned.index,
    stepName: planned.step.name,
    state,
    timestamp: Date.now(),
    ...(data !== undefined && { data }),
  });
}

/** A `log.chunk` stamped with the time of its first line. */
export function logChunk(job: { runId: string; jobId: string }, stepIndex: number, lines: string[], timestamp = Date.now()): AgentMessage {
  const { runId, jobId } = job;
  return { type: 'log.chunk', messageId: randomUUID(), runId, jobId, stepIndex, lines, timestamp };
}

/** Reports a step that never ran (`skipped` after a failure, `cancelled` after a stop). */
export function reportNotRun(scope: JobScope, planned: PlannedStep, state: 'skipped' | 'cancelled'): StepOutcome {
  sendStepStatus(scope, planned, state, { durationMs: 0 });
  return {
    index: planned.index,
    name: planned.step.name,
    state,
    durationMs: 0,
    continueOnError: planned.step.continueOnError === true,
  };
}
