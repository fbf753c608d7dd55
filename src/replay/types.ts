import type { PersistedMachineSnapshot } from '../../machines/projection.ts';
import type { RunContext } from '../../machines/run.machine.ts';
import type { DeadlineSpec, WaitingReason } from '../../machines/types.ts';
import type { JsonDifference } from './compare.ts';

/** Where the run and each job stand: what `run_events.state_after` holds. */
export interface StateSummary {
  run: unknown;
  jobs: Record<string, unknown>;
}

/** A named intent an action recorded (an effect the executor would run), without the deadlines. */
export interface RecordedIntent {
  type: string;
  params: unknown;
}

export interface ReplayStep {
  seq: number;
  /** The event's own time (`at`); seq 0 uses the run's creation time. */
  at: number;
  receivedAt: number;
  type: string;
  /** The event without `type` and `at`; `run.created` shows the workflow and job keys only. */
  event: Record<string, unknown>;
  before: StateSummary | null;
  after: StateSummary;
  /** The journaled `state_after` this step is checked against. */
  expected: unknown;
  matches: boolean;
  intents: RecordedIntent[];
  deadlines: { armed: DeadlineSpec[]; disarmed: string[]; fired: string | null };
  /** Jobs still waiting after this step, with the reason a user reads. */
  waiting: Record<string, WaitingReason>;
}

export interface ReplayDivergence {
  seq: number;
  eventType: string;
  expected: unknown;
  actual: StateSummary;
  differences: JsonDifference[];
}

export type SnapshotCheck =
  | { compared: true; seq: number; equal: boolean; differences: JsonDifference[] }
  | { compared: false; reason: string };

export interface ReplayReport {
  runId: string;
  machine: {
    id: string;
    version: number;
    recorded: { machineId: string; machineVersion: number } | null;
    /** True when the recorded version differs and the replay was forced. */
    forced: boolean;
  };
  lastSeq: number;
  /** The last seq applied. */
  to: number;
  steps: ReplayStep[];
  /** The first step whose state differs from the journal, or null. */
  divergence: ReplayDivergence | null;
  /** The replayed state at the stored snapshot's seq against that snapshot (value, context, children), when replay reached it. */
  snapshotCheck: SnapshotCheck;
  /** The actor threw while applying an event; replay stopped there. */
  failure: { seq: number; message: string } | null;
  /** The persisted snapshot after `to`: the exported state at that point. */
  snapshot: PersistedMachineSnapshot<RunContext>;
  /** No divergence, no failure, and the stored snapshot equal when it was compared. */
  exact: boolean;
}
