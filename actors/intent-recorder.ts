import { jobMachine } from '../machines/job.machine.ts';
import type { JobIntent } from '../machines/job.setup.ts';
import { runMachine } from '../machines/run.machine.ts';
import type { RunIntent } from '../machines/run.machine.ts';

export type Intent = JobIntent | RunIntent;

/**
 * Collects the intents a run actor records while it processes one event. Processing is
 * synchronous, so exactly one run is "open" at a time; a record for another run is a bug.
 */
export class IntentRecorder {
  private open: { runId: string; intents: Intent[] } | null = null;

  begin(runId: string): void {
    if (this.open) throw new Error(`intent recorder already open for run ${this.open.runId}`);
    this.open = { runId, intents: [] };
  }

  record(runId: string, intent: Intent): void {
    if (!this.open || this.open.runId !== runId) {
      throw new Error(`intent ${intent.type} recorded for run ${runId} outside its own event`);
    }
    this.open.intents.push(intent);
  }

  end(): Intent[] {
    const intents = this.open?.intents ?? [];
    this.open = null;
    return intents;
  }
}

/** The run machine with every named intent wired to the recorder. One instance serves all runs. */
export function runtimeRunMachine(recorder: IntentRecorder) {
  const job = jobMachine.provide({
    actions: {
      armDeadline: ({ context }, params) => recorder.record(context.runId, { type: 'armDeadline', params }),
      disarmDeadline: ({ context }, params) => recorder.record(context.runId, { type: 'disarmDeadline', params }),
      requestPlacement: ({ context }, params) => recorder.record(context.runId, { type: 'requestPlacement', params }),
      sendDispatch: ({ context }, params) => recorder.record(context.runId, { type: 'sendDispatch', params }),
      sendCancel: ({ context }, params) => recorder.record(context.runId, { type: 'sendCancel', params }),
      closeAgentConnection: ({ context }, params) =>
        recorder.record(context.runId, { type: 'closeAgentConnection', params }),
      releaseSlot: ({ context }, params) => recorder.record(context.runId, { type: 'releaseSlot', params }),
      requestConcurrency: ({ context }, params) => recorder.record(context.runId, { type: 'requestConcurrency', params }),
      releaseConcurrency: ({ context }, params) => recorder.record(context.runId, { type: 'releaseConcurrency', params }),
    },
  });
  return runMachine.provide({
    actions: {
      armDeadline: ({ context }, params) => recorder.record(context.runId, { type: 'armDeadline', params }),
      disarmDeadline: ({ context }, params) => recorder.record(context.runId, { type: 'disarmDeadline', params }),
      releaseSlot: ({ context }, params) => recorder.record(context.runId, { type: 'releaseSlot', params }),
    },
    actors: { job },
  });
}

export type RuntimeRunMachine = ReturnType<typeof runtimeRunMachine>;
