import { jobMachineOfRun } from '../../machines/job.machine.ts';
import type { JobContext } from '../../machines/job.setup.ts';
import { JOB_INTENTS, RUN_INTENTS, recordingSlots } from '../../machines/intents.ts';
import type { Intent, IntentSink } from '../../machines/intents.ts';
import { runMachine } from '../../machines/run.machine.ts';
import type { RunContext } from '../../machines/run.machine.ts';

export type { Intent };

/**
 * Collects the intents a run actor records while it processes one event. Processing is
 * synchronous, so exactly one run is "open" at a time; a record for another run is a bug.
 */
export class IntentRecorder {
  private open: { runId: string; intents: Intent[] } | null = null;

  /** `onEnd` hears of every run whose step ended: its state may have changed. */
  constructor(private readonly onEnd: (runId: string) => void = () => {}) {}

  begin(runId: string): void {
    if (this.open) throw new Error(`intent recorder already open for run ${this.open.runId}`);
    this.open = { runId, intents: [] };
  }

  readonly sink: IntentSink = (intent, from) => {
    if (!this.open || this.open.runId !== from.runId) {
      throw new Error(`intent ${intent.type} recorded for run ${from.runId} outside its own event`);
    }
    this.open.intents.push(intent);
  };

  end(): Intent[] {
    const intents = this.open?.intents ?? [];
    if (this.open) this.onEnd(this.open.runId);
    this.open = null;
    return intents;
  }

  /** The intents `runId`'s actor records while `step` runs (one event, or its start). */
  record(runId: string, step: () => void): Intent[] {
    this.begin(runId);
    try {
      step();
    } catch (thrown) {
      this.end();
      throw thrown;
    }
    return this.end();
  }
}

/** The run machine with every intent of both charts handed to `sink`. One instance serves all runs. */
export function runtimeRunMachine(sink: IntentSink) {
  const job = jobMachineOfRun.provide({
    actions: recordingSlots(JOB_INTENTS, (context: JobContext) => ({ runId: context.spec.runId, jobKey: context.spec.jobKey }), sink),
  });
  return runMachine.provide({
    actions: recordingSlots(RUN_INTENTS, (context: RunContext) => ({ runId: context.spec.runId, jobKey: null }), sink),
    actors: { job },
  });
}

export type RuntimeRunMachine = ReturnType<typeof runtimeRunMachine>;
