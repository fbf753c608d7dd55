import type { RunInput } from '../machines/run.types.ts';

/** Time as the runtime sees it. Tests pass a controllable clock; production the real one. */
export interface Clock {
  now(): number;
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

export const systemClock: Clock = {
  now: () => Date.now(),
  setTimeout: (fn, ms) => setTimeout(fn, ms),
  clearTimeout: (handle) => clearTimeout(handle as NodeJS.Timeout),
};

export type TimerChange =
  | { op: 'arm'; deadlineId: string; kind: string; jobKey: string | null; dueAt: number }
  | { op: 'disarm'; deadlineId: string };

/** Everything one batch of accepted events writes, per run, in one transaction (DESIGN.md §5). */
export interface CommitEntry {
  runId: string;
  isNewRun: boolean;
  events: { seq: number; event: unknown; receivedAt: number; stateAfter: unknown }[];
  snapshot: { seq: number; machineId: string; machineVersion: number; snapshot: unknown; status: string; updatedAt: number };
  run: {
    workflowName: string;
    repository: string | null;
    status: string;
    createdAt: number;
    finishedAt: number | null;
    failureReason: string | null;
    initFailure: unknown;
    inputSummary?: unknown;
  };
  jobs: {
    jobKey: string;
    status: string;
    waitingReason: unknown;
    attempt: number;
    agentId: string | null;
    dispatchId: string | null;
    outcome: string | null;
    initFailure: unknown;
    steps: unknown[];
    durationMs: number | null;
    outputs: unknown;
  }[];
  /** Job keys that no longer name a job (a dynamic-matrix template replaced by its children). */
  removedJobs: string[];
  timers: TimerChange[];
  effects: { effectId: string; kind: string; payload: unknown }[];
}

/**
 * An entry as the store writes it, serialized once when it is submitted (`RunStore.serialize`):
 * every free-form value is already JSON text, so a commit never stringifies and cannot fail on content.
 */
export interface SerializedEntry {
  runId: string;
  isNewRun: boolean;
  /** Journal rows and outbox rows, one JSON object each. */
  events: string[];
  effects: string[];
  snapshot: { seq: number; machineId: string; machineVersion: number; status: string; updatedAt: number; json: string };
  run: {
    workflowName: string;
    repository: string | null;
    status: string;
    createdAt: number;
    finishedAt: number | null;
    failureReason: string | null;
    initFailure: string;
    /** Absent: keep what is stored. */
    inputSummary?: string;
  };
  /** The JSON of each job's projection; equal text means the job did not change. */
  jobs: { jobKey: string; json: string }[];
  removedJobs: string[];
  timers: TimerChange[];
}

/** Fails a run whose entry could not be stored; built from plain fields only, so it can always be written. */
export interface RunFailureRecord {
  runId: string;
  /** The run's creation never became durable: the record creates it (owner row included). */
  isNewRun: boolean;
  /** The seq of the entry that could not be stored. */
  seq: number;
  machineId: string;
  machineVersion: number;
  workflowName: string;
  repository: string | null;
  createdAt: number;
  failedAt: number;
  reason: string;
}

export interface StoredRun {
  runId: string;
  seq: number;
  machineId: string;
  machineVersion: number;
  snapshot: unknown;
  status: string;
  timers: { deadlineId: string; kind: string; jobKey: string | null; dueAt: number }[];
  pendingEffects: { effectId: string; kind: string; payload: unknown }[];
}

/** The supervisor's view of the database: named, fenced writes (src/db implements it). */
export interface RunStore {
  /** Throws UnstorableEntryError for a value JSON cannot hold; never touches the database. */
  serialize(entry: CommitEntry): SerializedEntry;
  /**
   * One transaction for the batch. Throws FencedError, JournalConflictError, TransientStoreError
   * (retry later) or PermanentStoreError (these rows will fail again).
   */
  commit(entries: SerializedEntry[]): Promise<void>;
  /** Marks runs failed with their reason (fenced like commit, same errors). */
  failRuns(records: RunFailureRecord[]): Promise<void>;
  markEffectsDone(effectIds: string[]): Promise<void>;
  loadRuns(runIds: string[]): Promise<StoredRun[]>;
}

/** What the run actor needs to create a run; the pipeline or the API builds it. */
export interface NewRun {
  input: RunInput;
  repository: string | null;
  /** Frozen data the effect executor needs later (event, lock job configs); never secrets. */
  inputSummary?: unknown;
}

export interface Effect {
  effectId: string;
  runId: string;
  kind: string;
  payload: unknown;
}
