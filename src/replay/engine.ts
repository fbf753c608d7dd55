import { createActor } from 'xstate';
import type { Actor } from 'xstate';
import { IntentRecorder, runtimeRunMachine } from '../../actors/intent-recorder.ts';
import type { Intent, RuntimeRunMachine } from '../../actors/intent-recorder.ts';
import { SNAPSHOT_VERSION } from '../../actors/supervisor.ts';
import { RUN_MACHINE_ID } from '../../machines/run.machine.ts';
import type { RunContext, RunEvent } from '../../machines/run.machine.ts';
import type { RunInput } from '../../machines/run.types.ts';
import { projectJobs, stateSummary } from '../../machines/projection.ts';
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
  machine?: (recorder: IntentRecorder) => RuntimeRunMachine;
}

interface Session {
  runId: string;
  actor: Actor<RuntimeRunMachine>;
  recorder: IntentRecorder;
  failure: Error | null;
}

function persistedOf(actor: Actor<RuntimeRunMachine>): PersistedMachineSnapshot<RunContext> {
  return asJson(actor.getPersistedSnapshot()) as PersistedMachineSnapshot<RunContext>;
}

function summaryOf(actor: Actor<RuntimeRunMachine>): StateSummary {
  return stateSummary(persistedOf(actor));
}

function checkVersion(recorded: RecordedRun, force: boolean): ReplayReport['machine'] {
  const stored = recorded.snapshot ? { machineId: recorded.snapshot.machineId, machineVersion: recorded.snapshot.machineVersion } : null;
  const supported = { machineId: RUN_MACHINE_ID, machineVersion: SNAPSHOT_VERSION };
  const same = stored !== null && stored.machineId === supported.machineId && stored.machineVersion === supported.machineVersion;
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
function applyRecord(session: Session, record: JournalRecord): ReplayStep {
  const { actor, recorder } = session;
  const event = record.event as { type: string; at?: number };
  const before = record.seq === 0 ? null : summaryOf(actor);
  recorder.begin(session.runId);
  let intents: Intent[];
  try {
    if (record.seq === 0) actor.start();
    else actor.send(event as RunEvent);
  } finally {
    intents = recorder.end();
  }
  const persisted = persistedOf(actor);
  const after = stateSummary(persisted);
  const waiting = Object.fromEntries(projectJobs(persisted).flatMap((job) => (job.waitingReason ? [[job.jobKey, job.waitingReason]] : [])));
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

function snapshotCheck(recorded: RecordedRun, to: number, snapshot: PersistedMachineSnapshot<RunContext>): SnapshotCheck {
  const lastSeq = recorded.journal.length - 1;
  if (!recorded.snapshot) return { compared: false, reason: 'the run has no stored snapshot' };
  if (to !== lastSeq) return { compared: false, reason: `stopped at seq ${to}, before the end of the journal (seq ${lastSeq})` };
  if (recorded.snapshot.seq !== lastSeq) {
    return { compared: false, reason: `the stored snapshot is at seq ${recorded.snapshot.seq}, the journal ends at seq ${lastSeq}` };
  }
  const differences = diffJson(comparableSnapshot(recorded.snapshot.snapshot), comparableSnapshot(snapshot));
  return { compared: true, seq: lastSeq, equal: differences.length === 0, differences };
}

/**
 * Re-runs a recorded run through the chart: seq 0's input creates the actor, every later event is
 * sent with the `at` it was journaled with (no clock involved), and the state after each event is
 * compared with the journaled `state_after`. The first difference is the divergence.
 */
export function replayRecordedRun(recorded: RecordedRun, options: ReplayOptions = {}): ReplayReport {
  const machine = checkVersion(recorded, options.force === true);
  const input = checkJournal(recorded.runId, recorded.journal);
  const to = stopAt(recorded.journal, options.to);
  const recorder = new IntentRecorder();
  const logic = options.machine?.(recorder) ?? runtimeRunMachine(recorder);
  const actor = createActor(logic, { input, id: recorded.runId });
  const session: Session = { runId: recorded.runId, actor, recorder, failure: null };
  actor.subscribe({ error: (thrown) => (session.failure ??= thrown instanceof Error ? thrown : new Error(String(thrown))) });
  const steps: ReplayStep[] = [];
  let divergence: ReplayDivergence | null = null;
  let failure: ReplayReport['failure'] = null;
  for (const record of recorded.journal.slice(0, to + 1)) {
    const step = applyRecord(session, record);
    steps.push(step);
    if (!step.matches && !divergence) {
      divergence = { seq: step.seq, eventType: step.type, expected: step.expected, actual: step.after, differences: diffJson(step.expected, step.after) };
    }
    if (session.failure) {
      failure = { seq: record.seq, message: session.failure.message };
      break;
    }
  }
  const snapshot = persistedOf(actor);
  actor.stop();
  const check = failure ? { compared: false as const, reason: `the actor failed at seq ${failure.seq}` } : snapshotCheck(recorded, to, snapshot);
  const exact = !divergence && !failure && (!check.compared || check.equal);
  return { runId: recorded.runId, machine, lastSeq: recorded.journal.length - 1, to, steps, divergence, snapshotCheck: check, failure, snapshot, exact };
}
