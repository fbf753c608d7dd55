import { createActor } from 'xstate';
import { IntentRecorder, runtimeRunMachine } from '../../../actors/runs/intent-recorder.ts';
import { SNAPSHOT_VERSION } from '../../../actors/runs/supervisor.ts';
import type { IncomingRunEvent } from '../../../actors/runs/supervisor.ts';
import { stateSummary } from '../../../machines/projection.ts';
import type { PersistedMachineSnapshot } from '../../../machines/projection.ts';
import type { RunContext } from '../../../machines/run.machine.ts';
import type { RunInput } from '../../../machines/run.types.ts';
import type { JournalRecord } from '../../../src/db/journal.ts';
import type { RecordedRun } from '../../../src/replay/load.ts';

type Step = IncomingRunEvent | ((snapshot: PersistedMachineSnapshot<RunContext>) => IncomingRunEvent);

/**
 * Records a run the way the supervisor does, without a database: seq 0 is `run.created`, every
 * later event carries `at`, and `stateAfter` is the state summary; the stored snapshot is the last.
 */
export function recordInMemory(input: RunInput, steps: Step[], start = input.createdAt): RecordedRun {
  const recorder = new IntentRecorder();
  const actor = createActor(runtimeRunMachine(recorder.sink), { input, id: input.runId });
  const persisted = () => JSON.parse(JSON.stringify(actor.getPersistedSnapshot())) as PersistedMachineSnapshot<RunContext>;
  const journal: JournalRecord[] = [];
  recorder.begin(input.runId);
  actor.start();
  recorder.end();
  journal.push({ seq: 0, event: { type: 'run.created', input, at: input.createdAt }, receivedAt: input.createdAt, stateAfter: stateSummary(persisted()) });
  steps.forEach((step, index) => {
    const incoming = typeof step === 'function' ? step(persisted()) : step;
    const at = incoming.at ?? start + (index + 1) * 1000;
    const event = { ...incoming, at };
    recorder.begin(input.runId);
    actor.send(event);
    recorder.end();
    journal.push({ seq: index + 1, event, receivedAt: at, stateAfter: stateSummary(persisted()) });
  });
  const snapshot = { seq: journal.length - 1, machineId: 'run', machineVersion: SNAPSHOT_VERSION, snapshot: persisted(), status: 'x' };
  actor.stop();
  return { runId: input.runId, journal, snapshot };
}

/** A timer firing for the job deadline armed in `snapshot` (what the timer service would deliver). */
export function firing(jobKey: string, kind: string) {
  return (snapshot: PersistedMachineSnapshot<RunContext>): IncomingRunEvent => {
    const child = snapshot.children?.[jobKey]?.snapshot.context as { deadlines: Record<string, { id: string; at: number }> };
    const armed = child.deadlines[kind];
    if (!armed) throw new Error(`no ${kind} deadline armed on ${jobKey}`);
    return { type: `timer.${kind}.expired`, deadlineId: armed.id, dueAt: armed.at, jobKey, at: armed.at } as IncomingRunEvent;
  };
}
