import { RUN_MACHINE_ID } from '../../machines/run.machine.ts';
import type { RunContext } from '../../machines/run.machine.ts';
import { projectJobs, projectRun, stateSummary } from '../../machines/projection.ts';
import type { JobProjection, PersistedMachineSnapshot, RunProjection } from '../../machines/projection.ts';
import { isEffectKind } from '../../machines/intents.ts';
import type { EffectKind, Intent } from '../../machines/intents.ts';
import { isDeadlineKind } from '../../machines/types.ts';
import type { DeadlineKind } from '../../machines/types.ts';
import type { EffectRow, NewRun, RunCommit, RunFailureRecord, StoredRun, TimerChange } from './ports.ts';
import type { ArmedTimer } from './timer-service.ts';
import { migrateSnapshot } from './snapshot-migration.ts';
import type { FollowUpEvent } from './inline-placement.ts';

/** The run's state after an event, as its entry writes it. */
export interface EntryState {
  /** The snapshot to store; null when the entry defers it (docs/architecture.md#snapshots-and-journal-tails). */
  snapshot: PersistedMachineSnapshot<RunContext> | null;
  run: RunProjection;
  jobs: JobProjection[];
  /** The state summary journaled with the event. */
  summary: unknown;
  /** Job keys that no longer name a job. */
  fannedOut: string[];
}

/**
 * The state of an entry that stores its snapshot: everything is read from that snapshot. `wanted`
 * leaves out the rows of jobs (with an actor) known to be written as they are.
 */
export function storedState(snapshot: PersistedMachineSnapshot<RunContext>, wanted?: (jobKey: string) => boolean): EntryState {
  return { snapshot, run: projectRun(snapshot), jobs: projectJobs(snapshot, wanted), summary: stateSummary(snapshot), fannedOut: snapshot.context.fannedOut };
}

export interface EntryParts {
  runId: string;
  seq: number;
  event: { type: string; at: number };
  intents: Intent[];
  state: EntryState;
  machineVersion: number;
  /** A deadline that fired with this event: its row goes unless the event re-armed it. */
  firedDeadlineId: string | null;
  isNewRun: boolean;
  newRun?: NewRun;
  /** Grants answered in the same entry (inline-placement.ts); `seq` is then the last one's. */
  followUps?: FollowUpEvent[];
  /** The state `event` left before the follow-ups, when there are any. */
  firstStateAfter?: unknown;
}

export function timerChangesOf(intents: Intent[], firedDeadlineId: string | null): TimerChange<DeadlineKind>[] {
  const changes: TimerChange<DeadlineKind>[] = firedDeadlineId ? [{ op: 'disarm', deadlineId: firedDeadlineId }] : [];
  for (const intent of intents) {
    if (intent.type === 'armDeadline') {
      const { id, kind, at, jobKey } = intent.params;
      changes.push({ op: 'arm', deadlineId: id, kind, jobKey: jobKey ?? null, dueAt: at });
    } else if (intent.type === 'disarmDeadline') {
      changes.push({ op: 'disarm', deadlineId: intent.params.id });
    }
  }
  return changes;
}

function isEffectIntent(intent: Intent): intent is Intent<EffectKind> {
  return isEffectKind(intent.type);
}

/** The outbox row of an intent: its params are the effect's payload, unchanged. */
function effectRowOf(intent: Intent<EffectKind>, effectId: string): EffectRow {
  // A kind and its params travel together in both unions; TypeScript cannot follow the pairing.
  return { effectId, kind: intent.type, payload: intent.params } as EffectRow;
}

function journaledEvents(parts: EntryParts): RunCommit['events'] {
  const followUps = parts.followUps ?? [];
  const first = { seq: parts.seq - followUps.length, event: parts.event, receivedAt: parts.event.at };
  if (followUps.length === 0) return [{ ...first, stateAfter: parts.state.summary }];
  return [{ ...first, stateAfter: parts.firstStateAfter }, ...followUps.map((f) => ({ seq: f.seq, event: f.event, receivedAt: f.event.at, stateAfter: f.stateAfter }))];
}

function effectRowsOf(intents: Intent[], runId: string, seq: number): EffectRow[] {
  return intents.filter(isEffectIntent).map((intent, n) => effectRowOf(intent, `${runId}:${seq}:${n}`));
}

/** Everything one accepted event writes: journal row, snapshot, projections, timers, outbox. */
export function buildCommitEntry(parts: EntryParts): RunCommit {
  const { runId, seq, state } = parts;
  const { run, snapshot } = state;
  const effects = effectRowsOf(parts.intents, runId, seq);
  return {
    runId,
    isNewRun: parts.isNewRun,
    ...(snapshot === null ? { deferSnapshot: true } : {}),
    events: journaledEvents(parts),
    snapshot: {
      seq,
      machineId: RUN_MACHINE_ID,
      machineVersion: parts.machineVersion,
      snapshot,
      status: run.status,
      updatedAt: parts.event.at,
    },
    run: {
      workflowName: run.workflowName,
      repository: parts.newRun?.repository ?? null,
      status: run.status,
      createdAt: run.createdAt,
      finishedAt: run.finishedAt,
      failureReason: run.failureReason,
      initFailure: run.initFailure,
      ...(parts.newRun?.inputSummary !== undefined ? { inputSummary: parts.newRun.inputSummary } : {}),
    },
    jobs: state.jobs,
    removedJobs: state.fannedOut,
    timers: timerChangesOf(parts.intents, parts.firedDeadlineId),
    effects,
  };
}

/** What a failure record is built from: a CommitEntry or its SerializedEntry. */
interface FailureSource {
  runId: string;
  isNewRun: boolean;
  snapshot: { seq: number; machineId: string; machineVersion: number };
  run: { workflowName: string; repository: string | null; createdAt: number };
}

const MAX_REASON = 2000;

/** The record that fails a run whose entry could not be stored, in place of that entry. */
export function runFailureOf(entry: FailureSource, reason: string, failedAt: number): RunFailureRecord {
  const { snapshot, run } = entry;
  return {
    ...{ runId: entry.runId, isNewRun: entry.isNewRun, seq: snapshot.seq, machineId: snapshot.machineId, machineVersion: snapshot.machineVersion },
    ...{ workflowName: run.workflowName, repository: run.repository, createdAt: run.createdAt, failedAt },
    reason: reason.length > MAX_REASON ? `${reason.slice(0, MAX_REASON - 1)}…` : reason,
  };
}

/** A run left with no actor: the state it was last known by, and its input when it is new. */
export interface LostRun {
  runId: string;
  seq: number;
  machineVersion: number;
  context: Partial<RunContext> | undefined;
  newRun: NewRun | undefined;
}

/**
 * The record that fails a run left with no actor (it crashed, or its stored state could not be
 * restored): the run shows failed with the reason instead of staying running with nothing acting on
 * it. A crash while the context was built leaves none, so the run's own fields come from its input.
 */
export function lostRunFailureOf(lost: LostRun, reason: string, failedAt: number): RunFailureRecord {
  const { runId, newRun, context } = lost;
  const source: FailureSource = {
    ...{ runId, isNewRun: newRun !== undefined, snapshot: { seq: lost.seq, machineId: RUN_MACHINE_ID, machineVersion: lost.machineVersion } },
    run: {
      workflowName: newRun?.input.workflowName ?? context?.spec?.workflowName ?? '',
      repository: newRun?.repository ?? null,
      createdAt: newRun?.input.createdAt ?? context?.spec?.createdAt ?? failedAt,
    },
  };
  return runFailureOf(source, reason, failedAt);
}

/** The record that fails a run whose actor crashed (an action threw), with the error. */
export function crashFailureOf(crash: LostRun & { error: unknown }, failedAt: number): RunFailureRecord {
  const message = crash.error instanceof Error ? crash.error.message : String(crash.error);
  return lostRunFailureOf(crash, `its run actor crashed: ${message}`, failedAt);
}

/** The failure of a stored run of this build's version that its chart cannot restore. */
export function unrestorableFailureOf(row: StoredRun, error: Error, failedAt: number): RunFailureRecord {
  // Read in this release's format when it migrates (an earlier release's snapshot that still failed to restore).
  const snapshot = migrateSnapshot(row.machineVersion, row.snapshot) ?? row.snapshot;
  const context = (snapshot as { context?: Partial<RunContext> } | null)?.context;
  const lost = { runId: row.runId, seq: journalHeadOf(row), machineVersion: row.machineVersion, context, newRun: undefined };
  return lostRunFailureOf(lost, `its stored state could not be restored: ${error.message}`, failedAt);
}

/** The seq of a stored run's last journaled event: its snapshot's, or its tail's last one. */
export function journalHeadOf(row: Pick<StoredRun, 'seq' | 'tail'>): number {
  return row.tail?.at(-1)?.seq ?? row.seq;
}

/** A stored run's deadlines and pending effects, checked: rows of a kind this build does not know are named apart. */
export function restoredWorkOf(row: StoredRun): { timers: Omit<ArmedTimer, 'runId'>[]; effects: EffectRow[]; unknownKinds: string[] } {
  const timers: Omit<ArmedTimer, 'runId'>[] = [];
  const effects: EffectRow[] = [];
  const unknownKinds: string[] = [];
  for (const timer of row.timers) {
    if (isDeadlineKind(timer.kind)) timers.push({ ...timer, kind: timer.kind });
    else unknownKinds.push(`deadline ${timer.kind}`);
  }
  for (const effect of row.pendingEffects) {
    // The payload was written by buildCommitEntry with this kind's params (effectRowOf).
    if (isEffectKind(effect.kind)) effects.push(effect as EffectRow);
    else unknownKinds.push(`effect ${effect.kind}`);
  }
  return { timers, effects, unknownKinds };
}

/** What an event that changed no state leaves to write: its journal row and the effects it asked for. */
export interface UnchangedParts {
  runId: string;
  seq: number;
  event: { type: string; at: number };
  intents: Intent[];
  machineVersion: number;
  /** The run's live state (unchanged by the event), for its projection. */
  live: { value: unknown; context: RunContext; tags: ReadonlySet<string> };
  stateAfter: unknown;
  /** Behind a journal tail, the stored snapshot keeps its seq too. */
  deferSnapshot?: boolean;
}

/**
 * The entry of an event after which the run and every job hold the very snapshots they held before
 * (xstate snapshots are immutable): nothing stored changes but the snapshot's seq. Only an event that
 * asked for nothing durable (UNRECORDED_EFFECTS alone, no deadline) gets one.
 */
export function unchangedEntry(parts: UnchangedParts): RunCommit {
  const { runId, seq } = parts;
  const run = projectRun(parts.live);
  return {
    runId,
    isNewRun: false,
    unchanged: true,
    ...(parts.deferSnapshot === true ? { deferSnapshot: true } : {}),
    events: [{ seq, event: parts.event, receivedAt: parts.event.at, stateAfter: parts.stateAfter }],
    snapshot: { seq, machineId: RUN_MACHINE_ID, machineVersion: parts.machineVersion, snapshot: null, status: run.status, updatedAt: parts.event.at },
    run: { ...run, repository: null },
    jobs: [],
    removedJobs: [],
    timers: [],
    effects: effectRowsOf(parts.intents, runId, seq),
  };
}
