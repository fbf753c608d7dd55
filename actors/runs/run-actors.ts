import { createActor } from 'xstate';
import type { Actor } from 'xstate';
import type { JobContext } from '../../machines/job.setup.ts';
import { projectJobsOf, projectRun } from '../../machines/projection.ts';
import type { PersistedMachineSnapshot } from '../../machines/projection.ts';
import type { RunContext } from '../../machines/run.machine.ts';
import type { RunInput } from '../../machines/run.types.ts';
import type { RuntimeRunMachine } from './intent-recorder.ts';
import type { EntryState } from './commit-entry.ts';
import { jobChanged, type WrittenJob } from './commit-plan.ts';

/** The JSON form of a run actor's state, as the store writes it: XState's own persisted snapshot. */
export function persistedOf(actor: Actor<RuntimeRunMachine>): PersistedMachineSnapshot<RunContext> {
  return actor.getPersistedSnapshot() as unknown as PersistedMachineSnapshot<RunContext>;
}

/** Deadline id → due time of every deadline the run and its jobs hold armed right now (read from the live state, not persisted first). */
export function armedDeadlines(actor: Actor<RuntimeRunMachine>): Map<string, number> {
  const armed = new Map<string, number>();
  const add = (deadlines: Record<string, { id: string; at: number } | undefined>) => {
    for (const deadline of Object.values(deadlines)) if (deadline) armed.set(deadline.id, deadline.at);
  };
  const snapshot = actor.getSnapshot();
  add(snapshot.context.deadlines);
  for (const jobKey in snapshot.children) {
    const child = snapshot.children[jobKey]?.getSnapshot();
    if (child) add(child.context.deadlines);
  }
  return armed;
}

/**
 * A deadline event for an earlier due time of a deadline armed again since (by an event ahead of it:
 * an agent's reclaim after a takeover re-arms the job lease whose old due time the restore had just
 * fired). The chart ignores it; its disarm would take the new deadline with it, and the job would
 * wait for an agent that never reports, with no deadline left to end the wait (chaos seed 2047895894).
 */
export function rearmedSince(actor: Actor<RuntimeRunMachine>, deadlineId: string, event: object): boolean {
  const firedFor = (event as { dueAt?: unknown }).dueAt;
  const armedFor = armedDeadlines(actor).get(deadlineId);
  return typeof firedFor === 'number' && armedFor !== undefined && armedFor !== firedFor;
}

/** Calls `visit` for each job of the run still open (its actor active), in spawn order. */
export function visitOpenJobs(handle: { actor: Actor<RuntimeRunMachine> }, visit: (jobKey: string, context: JobContext) => void): void {
  const children = handle.actor.getSnapshot().children;
  for (const jobKey in children) {
    const snapshot = children[jobKey]?.getSnapshot();
    if (snapshot?.status === 'active') visit(jobKey, snapshot.context);
  }
}

/** The waiting reason kind of each open job of the run that waits; undefined for a run not in memory. */
export function waitingKindsOf(handle: { actor: Actor<RuntimeRunMachine> } | undefined): string[] | undefined {
  if (handle === undefined) return undefined;
  const kinds: string[] = [];
  visitOpenJobs(handle, (_jobKey, context) => {
    if (context.waiting) kinds.push(context.waiting.kind);
  });
  return kinds;
}

/**
 * The snapshot objects a run's state is made of: the run's, then each job's key and snapshot. xstate
 * snapshots are immutable and a transition that changes nothing keeps them, so equal lists mean the
 * same state (`unchangedEntry`).
 */
export function stateRefsOf(actor: Actor<RuntimeRunMachine>): unknown[] {
  const snapshot = actor.getSnapshot();
  const refs: unknown[] = [snapshot];
  for (const jobKey in snapshot.children) refs.push(jobKey, snapshot.children[jobKey]?.getSnapshot());
  return refs;
}

export function sameRefs(before: readonly unknown[], after: readonly unknown[]): boolean {
  return before.length === after.length && before.every((ref, i) => ref === after[i]);
}

/**
 * The state of an entry that defers its snapshot, read from the live actor: nothing is persisted,
 * and statuses come from the live states' tags instead of resolving stored ones against the chart.
 */
export function deferredState(actor: Actor<RuntimeRunMachine>, written: ReadonlyMap<string, WrittenJob> = new Map()): EntryState {
  const live = actor.getSnapshot();
  const jobs = projectJobsOf(live.context, (jobKey) => live.children[jobKey]?.getSnapshot(), changedJobs(actor, written));
  return { snapshot: null, run: projectRun(live), jobs, summary: liveStateSummary(actor), fannedOut: live.context.fannedOut };
}

/**
 * Whether a job has something new to write: its actor no longer has the snapshot its written row was
 * read from (xstate keeps a snapshot an event does not change). Unchanged jobs are neither projected
 * nor serialized, whether the entry stores its snapshot or defers it.
 */
export function changedJobs(actor: Actor<RuntimeRunMachine>, written: ReadonlyMap<string, WrittenJob>): (jobKey: string) => boolean {
  const children = actor.getSnapshot().children;
  return (jobKey) => jobChanged(written, jobKey, children[jobKey]?.getSnapshot());
}

/** `stateSummary` of the live state, without persisting it first. */
export function liveStateSummary(actor: Actor<RuntimeRunMachine>): { run: unknown; jobs: Record<string, unknown> } {
  const snapshot = actor.getSnapshot();
  const jobs: Record<string, unknown> = {};
  for (const jobKey in snapshot.children) jobs[jobKey] = snapshot.children[jobKey]?.getSnapshot().value;
  return { run: snapshot.value, jobs };
}

/**
 * Creates and stops the run actors of one supervisor. Each run actor is a root actor with an XState
 * system of its own (about 1.8 KB of every live run, measured on 10,000 actors): sharing one system
 * needs a parent, and XState's public `stop()` refuses an actor that has one.
 */
export class RunActorHost {
  /** `watch` hears of each run actor restored, and of each stopped. */
  constructor(private readonly watch: { restored(runId: string): void; stopped(runId: string): void } = { restored: () => {}, stopped: () => {} }) {}

  create(machine: RuntimeRunMachine, input: RunInput, runId: string): Actor<RuntimeRunMachine> {
    return createActor(machine, { input, id: runId });
  }

  /** Input is only read on creation; a restored actor takes everything from its snapshot. */
  restore(machine: RuntimeRunMachine, snapshot: unknown, runId: string): Actor<RuntimeRunMachine> {
    this.watch.restored(runId);
    return createActor(machine, { snapshot: snapshot as never, input: undefined, id: runId });
  }

  /** Stops a run actor, its jobs with it. */
  stop(actor: Actor<RuntimeRunMachine>): void {
    actor.stop();
    this.watch.stopped(actor.id);
  }
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
