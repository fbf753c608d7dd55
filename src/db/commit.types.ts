/** A durable-deadline change recorded in the same transaction as the snapshot (DESIGN.md §4). */
export type TimerChange =
  | { op: 'arm'; deadlineId: string; kind: string; jobKey: string | null; dueAt: number }
  | { op: 'disarm'; deadlineId: string };

export interface JournalEvent {
  seq: number;
  event: unknown;
  receivedAt: number;
  stateAfter: unknown;
}

export interface SnapshotRow {
  seq: number;
  machineId: string;
  machineVersion: number;
  snapshot: unknown;
  status: string;
  updatedAt: number;
}

export interface RunProjection {
  workflowName: string;
  repository: string | null;
  status: string;
  createdAt: number;
  finishedAt: number | null;
  failureReason: string | null;
  initFailure: unknown;
  /** Left unchanged when undefined. */
  inputSummary?: unknown;
}

export interface JobProjection {
  jobKey: string;
  status: string;
  waitingReason: unknown;
  attempt: number;
  agentId: string | null;
  dispatchId: string | null;
  outcome: string | null;
  initFailure: unknown;
}

export interface OutboxEffect {
  effectId: string;
  kind: string;
  payload: unknown;
}

/** Everything one or more accepted events of one run change, written in one group commit. */
export interface CommitEntry {
  runId: string;
  /** Insert run_owner (coordinator, epoch) for this run. */
  isNewRun: boolean;
  events: JournalEvent[];
  snapshot: SnapshotRow;
  run: RunProjection;
  jobs: JobProjection[];
  timers: TimerChange[];
  effects: OutboxEffect[];
}

export interface CommitBatchInput {
  coordinatorId: string;
  epoch: number;
  now: number;
  entries: readonly CommitEntry[];
}
