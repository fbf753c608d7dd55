import type { EffectKind, IntentParams } from '../../machines/intents.ts';
import type { DeadlineKind } from '../../machines/types.ts';
import type { RunInput } from '../../machines/run.types.ts';

/** A change to the deadline rows; the store keeps `kind` as text, the runtime writes only DeadlineKinds. */
export type TimerChange<Kind extends string = string> =
  | { op: 'arm'; deadlineId: string; kind: Kind; jobKey: string | null; dueAt: number }
  | { op: 'disarm'; deadlineId: string };

/** An outbox row as the store keeps it: it does not interpret the kind. */
export interface StoredEffect {
  effectId: string;
  kind: string;
  payload: unknown;
}

/**
 * Everything one batch of accepted events writes, per run, in one transaction (docs/architecture.md#ownership-leases-epochs-fencing-and-adoption). The store
 * takes any rows; the runtime builds `RunCommit`, whose deadlines and effects are of known kinds.
 */
export interface CommitEntry<Effects extends StoredEffect = StoredEffect, Kind extends string = string> {
  runId: string;
  isNewRun: boolean;
  /**
   * The event changed no state (a restored run whose jobs only ask for agents again): its journal row
   * and effects are written, the stored snapshot only moves to its seq, and the run and job rows stay.
   * `snapshot.snapshot` is then not read.
   */
  unchanged?: boolean;
  /**
   * The stored snapshot stays at its seq: the state after this event is kept by its journal row, and a
   * restore replays the journal after the snapshot (`StoredRun.tail`). The run and job rows are still
   * written when the state changed. See docs/architecture.md#snapshots-and-journal-tails.
   */
  deferSnapshot?: boolean;
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
    /** When the job last entered each status; absent where it is not known. */
    times?: Record<string, number> | null;
  }[];
  /** Job keys that no longer name a job (a dynamic-matrix template replaced by its children). */
  removedJobs: string[];
  timers: TimerChange<Kind>[];
  /** Outbox rows: the effects this event asked for, in order. */
  effects: Effects[];
}

export type RunCommit = CommitEntry<EffectRow, DeadlineKind>;

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
  /** The state is the one before this event (`CommitEntry.unchanged`). */
  unchanged?: boolean;
  /** The stored snapshot row is not written (`CommitEntry.deferSnapshot`). */
  deferred?: boolean;
  /** `json` null: no state to store; an `unchanged`, not `deferred` entry moves only seq and updated_at. */
  snapshot: { seq: number; machineId: string; machineVersion: number; status: string; updatedAt: number; json: string | null };
  /** The run row, its free-form values as JSON; an absent `inputSummary` keeps what is stored. */
  run: Omit<CommitEntry['run'], 'initFailure' | 'inputSummary'> & { initFailure: string; inputSummary?: string };
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
  /** Deadlines as stored; the supervisor checks their kinds before arming them. */
  timers: { deadlineId: string; kind: string; jobKey: string | null; dueAt: number }[];
  /** Effects committed but not done, as stored; the supervisor checks their kinds before running them. */
  pendingEffects: StoredEffect[];
  /** Journaled events after the snapshot's seq, in order: replayed onto the restored snapshot. */
  tail?: { seq: number; event: unknown }[];
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
  /**
   * What the run comes from, still being recorded (its delivery's row): the run is made ready at
   * once, but its first entry is written only once this resolves true; false, nothing of it is
   * written and `createRun` rejects with RunCauseNotRecordedError.
   */
  recordedCause?: Promise<boolean>;
}

/** An outbox row: a committed intent with its idempotency key `runId:seq:n`. */
export type EffectRow<K extends EffectKind = EffectKind> = { [P in K]: { effectId: string; kind: P; payload: IntentParams[P] } }[K];

/** A committed intent to carry out, for its run; `Effect<'sendDispatch'>` is that kind alone. */
export type Effect<K extends EffectKind = EffectKind> = EffectRow<K> & { runId: string };

/** One handler per effect kind: a kind without one does not compile. Each must be idempotent by effectId. */
export type EffectHandlers = { [K in EffectKind]: (effect: Effect<K>) => Promise<void> | void };
