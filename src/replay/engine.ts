import { createActor } from 'xstate';
import type { Actor } from 'xstate';
import { IntentRecorder, runtimeRunMachine } from '../../actors/runs/intent-recorder.ts';
import type { Intent, RuntimeRunMachine } from '../../actors/runs/intent-recorder.ts';
import type { IntentSink } from '../../machines/intents.ts';
import { persistedOf } from '../../actors/runs/run-actors.ts';
import { SNAPSHOT_VERSION, migrateSnapshot } from '../../actors/runs/snapshot-migration.ts';
import { RUN_MACHINE_ID } from '../../machines/run.machine.ts';
import type { RunContext, RunEvent } from '../../machines/run.machine.ts';
import type { RunInput } from '../../machines/run.types.ts';
import type { WaitingReason } from '../../machines/types.ts';
import type { PersistedMachineSnapshot } from '../../machines/projection.ts';
import type { JournalRecord } from '../db/journal.ts';
import { asJson, comparableSnapshot, diffJson } from './compare.ts';
import { ReplayJournalError, ReplayRangeError, ReplayVersionError } from './errors.ts';
import type { RecordedRun } from './load.ts';
import { compactEvent, splitIntents } from './step.ts';
import type { ReplayDivergence, ReplayReport, ReplayStep, SnapshotCheck, StateSummary } from './types.ts';

export interface ReplayOptions {
  /** Stop after applying this seq (default: the last one). */
  to?: number;
  /** Replay a run recorded by another chart version instead of refusing it. */
  force?: boolean;
  /** The chart to replay with; default the one this build runs. Tests pass an altered one. */
  machine?: (sink: IntentSink) => RuntimeRunMachine;
}

interface Session {
  runId: string;
  actor: Actor<RuntimeRunMachine>;
  recorder: IntentRecorder;
  failure: Error | null;
}

/** The replayed state as the supervisor stores it (`persistedOf`), through JSON. */
function persistedAsJson(actor: Actor<RuntimeRunMachine>): PersistedMachineSnapshot<RunContext> {
  return asJson(persistedOf(actor)) as PersistedMachineSnapshot<RunContext>;
}

/**
 * `stateSummary` of the live snapshot, plus the waiting reasons, without persisting the whole
 * actor tree at every step (the persisted form is built once, at the stop point).
 */
function summaryOf(actor: Actor<RuntimeRunMachine>): { summary: StateSummary; waiting: Record<string, WaitingReason> } {
  const snapshot = actor.getSnapshot();
  const jobs: Record<string, unknown> = {};
  const waiting: Record<string, WaitingReason> = {};
  for (const [key, child] of Object.entries(snapshot.children)) {
    if (!child) continue;
    const job = child.getSnapshot();
    jobs[key] = job.value;
    if (job.context.waiting) waiting[key] = job.context.waiting;
  }
  for (const [key, node] of Object.entries(snapshot.context.jobs)) {
    if (!(key in jobs) && node.gate) waiting[key] = node.gate;
  }
  return { summary: asJson({ run: snapshot.value, jobs }) as StateSummary, waiting };
}

/** The stored snapshot in this build's format: one of an earlier release is migrated (actors/runs/snapshot-migration.ts); null when none reads. */
function storedInThisFormat(recorded: RecordedRun): unknown {
  const stored = recorded.snapshot;
  return stored && stored.machineId === RUN_MACHINE_ID ? migrateSnapshot(stored.machineVersion, stored.snapshot) : null;
}

function checkVersion(recorded: RecordedRun, force: boolean): ReplayReport['machine'] {
  const stored = recorded.snapshot ? { machineId: recorded.snapshot.machineId, machineVersion: recorded.snapshot.machineVersion } : null;
  const supported = { machineId: RUN_MACHINE_ID, machineVersion: SNAPSHOT_VERSION };
  // A snapshot this build migrates compares like its own: the charts did not change what they do.
  const same = stored !== null && storedInThisFormat(recorded) !== null;
  if (!same && !force) throw new ReplayVersionError(recorded.runId, stored, supported);
  return { id: RUN_MACHINE_ID, version: SNAPSHOT_VERSION, recorded: stored, forced: !same };
}

function checkJournal(runId: string, journal: JournalRecord[]): RunInput {
  journal.forEach((record, index) => {
    if (record.seq !== index) throw new ReplayJournalError(runId, index, `expected seq ${index}, found ${record.seq}`);
  });
  const first = journal[0]?.event as { type?: unknown; input?: RunInput } | undefined;
  if (first?.type !== 'run.created' || typeof first.input !== 'object') {
    throw new ReplayJournalError(runId, 0, 'the first event is not run.created with the run input');
  }
  return first.input;
}

function stopAt(journal: JournalRecord[], to: number | undefined): number {
  const lastSeq = journal.length - 1;
  if (to === undefined) return lastSeq;
  if (!Number.isInteger(to) || to < 0 || to > lastSeq) throw new ReplayRangeError(to, lastSeq);
  return to;
}

/** Applies one journal record (seq 0 starts the actor) and records what it did. */
function applyRecord(session: Session, record: JournalRecord, before: StateSummary | null): ReplayStep {
  const { actor, recorder } = session;
  const event = record.event as { type: string; at?: number };
  recorder.begin(session.runId);
  let intents: Intent[];
  try {
    if (record.seq === 0) actor.start();
    else actor.send(event as RunEvent);
  } finally {
    intents = recorder.end();
  }
  const { summary: after, waiting } = summaryOf(actor);
  return {
    seq: record.seq,
    at: typeof event.at === 'number' ? event.at : record.receivedAt,
    receivedAt: record.receivedAt,
    type: event.type,
    event: compactEvent(event),
    before,
    after,
    expected: record.stateAfter,
    matches: diffJson(record.stateAfter, after).length === 0,
    ...splitIntents(intents, event),
    waiting,
  };
}

/**
 * The stored snapshot against the replayed state at the snapshot's seq (`atStoredSeq`): the journal
 * may go on past it (docs/architecture.md#snapshots-and-journal-tails).
 */
function snapshotCheck(recorded: RecordedRun, to: number, atStoredSeq: PersistedMachineSnapshot<RunContext> | null): SnapshotCheck {
  const lastSeq = recorded.journal.length - 1;
  if (!recorded.snapshot) return { compared: false, reason: 'the run has no stored snapshot' };
  if (recorded.snapshot.seq > lastSeq) {
    return { compared: false, reason: `the stored snapshot is at seq ${recorded.snapshot.seq}, after the end of the journal (seq ${lastSeq})` };
  }
  if (atStoredSeq === null) return { compared: false, reason: `stopped at seq ${to}, before the stored snapshot (seq ${recorded.snapshot.seq})` };
  const stored = (storedInThisFormat(recorded) ?? recorded.snapshot.snapshot) as PersistedMachineSnapshot<RunContext>;
  const differences = diffJson(comparableSnapshot(stored), comparableSnapshot(atStoredSeq));
  return { compared: true, seq: recorded.snapshot.seq, equal: differences.length === 0, differences };
}

/** Replay yields to the event loop this often, so a coordinator serving it stays responsive. */
const SLICE_MS = 20;

function yieldToEventLoop(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

function divergenceOf(step: ReplayStep): ReplayDivergence {
  return { seq: step.seq, eventType: step.type, expected: step.expected, actual: step.after, differences: diffJson(step.expected, step.after) };
}

/**
 * Re-runs a recorded run through the chart: seq 0's input creates the actor, every later event is
 * sent with the `at` it was journaled with (no clock involved), and the state after each event is
 * compared with the journaled `state_after`. The first difference is the divergence.
 */
export async function replayRecordedRun(recorded: RecordedRun, options: ReplayOptions = {}): Promise<ReplayReport> {
  const machine = checkVersion(recorded, options.force === true);
  const input = checkJournal(recorded.runId, recorded.journal);
  const to = stopAt(recorded.journal, options.to);
  const recorder = new IntentRecorder();
  const actor = createActor(options.machine?.(recorder.sink) ?? runtimeRunMachine(recorder.sink), { input, id: recorded.runId });
  const session: Session = { runId: recorded.runId, actor, recorder, failure: null };
  actor.subscribe({ error: (thrown) => (session.failure ??= thrown instanceof Error ? thrown : new Error(String(thrown))) });
  const steps: ReplayStep[] = [];
  let divergence: ReplayDivergence | null = null;
  let failure: ReplayReport['failure'] = null;
  let sliceStarted = performance.now();
  let atStoredSeq: PersistedMachineSnapshot<RunContext> | null = null;
  for (const record of recorded.journal.slice(0, to + 1)) {
    const step = applyRecord(session, record, steps.at(-1)?.after ?? null);
    steps.push(step);
    if (record.seq === recorded.snapshot?.seq && !session.failure) atStoredSeq = persistedAsJson(actor);
    if (!step.matches) divergence ??= divergenceOf(step);
    if (session.failure) {
      failure = { seq: record.seq, message: session.failure.message };
      break;
    }
    if (performance.now() - sliceStarted > SLICE_MS) {
      await yieldToEventLoop();
      sliceStarted = performance.now();
    }
  }
  const snapshot = persistedAsJson(actor);
  actor.stop();
  const check = failure ? { compared: false as const, reason: `the actor failed at seq ${failure.seq}` } : snapshotCheck(recorded, to, atStoredSeq);
  const exact = !divergence && !failure && (!check.compared || check.equal);
  return { runId: recorded.runId, machine, lastSeq: recorded.journal.length - 1, to, steps, divergence, snapshotCheck: check, failure, snapshot, exact };
}
