import type { TerminalJobStatus } from './status.ts';
import type { AgentRequirements, ConcurrencyPolicy, InitFailure, JobTimeouts, NeedEdge, WaitingReason } from './types.ts';

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
}

export interface FanoutGroup {
  children: string[];
  maxParallel: number | null;
  failFast: boolean;
  halted: boolean;
}

/** What the run sends to a job after evaluating its graph. */
export type GateDecision =
  | { jobKey: string; kind: 'release' }
  | { jobKey: string; kind: 'skip'; reason: string }
  | { jobKey: string; kind: 'gate'; reason: WaitingReason };
