import { createActor } from 'xstate';
import type { Actor } from 'xstate';
import type { JobContext } from '../../machines/job.setup.ts';
import type { PersistedMachineSnapshot } from '../../machines/projection.ts';
import type { RunContext } from '../../machines/run.machine.ts';
import type { RuntimeRunMachine } from './intent-recorder.ts';

/** The JSON form of a run actor's state; XState types it loosely as `Snapshot<unknown>`. */
export function persistedOf(actor: Actor<RuntimeRunMachine>): PersistedMachineSnapshot<RunContext> {
  return actor.getPersistedSnapshot() as unknown as PersistedMachineSnapshot<RunContext>;
}

/** Deadline id → due time of every deadline the run and its jobs hold armed right now. */
export function armedDeadlines(snapshot: PersistedMachineSnapshot<RunContext>): Map<string, number> {
  const armed = new Map<string, number>();
  const add = (deadlines: Record<string, { id: string; at: number } | undefined>) => {
    for (const deadline of Object.values(deadlines)) if (deadline) armed.set(deadline.id, deadline.at);
  };
  add(snapshot.context.deadlines);
  for (const child of Object.values(snapshot.children ?? {})) add((child.snapshot.context as JobContext).deadlines);
  return armed;
}

/** Calls `visit` for each job of the run still open (its actor active), in spawn order. */
export function visitOpenJobs(handle: { actor: Actor<RuntimeRunMachine> }, visit: (jobKey: string, context: JobContext) => void): void {
  const children = handle.actor.getSnapshot().children;
  for (const jobKey in children) {
    const snapshot = children[jobKey]?.getSnapshot();
    if (snapshot?.status === 'active') visit(jobKey, snapshot.context);
  }
}

/** Input is only read on creation; a restored actor takes everything from its snapshot. */
export function restoreActor(machine: RuntimeRunMachine, snapshot: unknown, runId: string): Actor<RuntimeRunMachine> {
  return createActor(machine, { snapshot: snapshot as never, input: undefined, id: runId });
}

/**
 * One observer shared by every run actor of a supervisor. XState binds the handler of each
 * subscription; a closure per run (named by the TypeScript loader) and its bound copy cost 0.8 KB of
 * every live run, a bound method 57 B. A crash names no actor: `onCrash` finds them by status.
 */
export class CrashObserver {
  constructor(private readonly onCrash: () => void) {}

  error(): void {
    this.onCrash();
  }
}
