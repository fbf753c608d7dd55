import type { Logger } from 'pino';
import { RUN_MACHINE_ID } from '../../machines/run.machine.ts';
import type { RunContext, RunEvent } from '../../machines/run.machine.ts';
import type { JobContext, JobTag } from '../../machines/job.setup.ts';
import type { PersistedMachineSnapshot } from '../../machines/projection.ts';
import { RunNotOwnedError, RunNotStorableError, causeRecorded, SupervisorStoppedError, UnknownMachineVersionError, UnstorableEntryError } from './errors.ts';
import { coerceError } from '../../lib/errors.ts';
import { GroupCommitter } from './group-commit.ts';
import type { GiveUp } from './group-commit.ts';
import { IntentRecorder, runtimeRunMachine } from './intent-recorder.ts';
import type { Intent, RuntimeRunMachine } from './intent-recorder.ts';
import type { FencedError } from './errors.ts';
import type { CommitEntry, Effect, NewRun, RunCommit, SerializedEntry, StoredRun } from './ports.ts';
import { SNAPSHOT_VERSION, migrateSnapshot } from './snapshot-migration.ts';
import { buildCommitEntry, crashFailureOf, journalHeadOf, restoredWorkOf, runFailureOf, storedState, unchangedEntry, unrestorableFailureOf } from './commit-entry.ts';
import type { ArmedTimer } from './timer-service.ts';
import { answerPlacements } from './inline-placement.ts';
import type { InlineGrants } from './inline-placement.ts';
import { TimerService } from './timer-service.ts';
import { deliverDeadline } from './deadline-delivery.ts';
import { CommitObservers } from './commit-observers.ts';
import type { CommittedUpdate } from './commit-observers.ts';
import { CrashObserver, RunActorHost, armedDeadlines, changedJobs, rearmedSince, deferredState, liveStateSummary, persistedOf, sameRefs, stateRefsOf, visitOpenJobs, waitingKindsOf } from './run-actors.ts';
import { WaitingTally } from './waiting-tally.ts';
import { noteSerialized } from './snapshot-policy.ts';
import { asksNothingDurable, jobRowsToWrite, planEntry, storedEffects } from './commit-plan.ts';
import type { RestoreReport, RunHandle, SupervisorOptions } from './supervisor.types.ts';

export type { CommittedUpdate } from './commit-observers.ts';
export type { RestoreReport, SupervisorOptions } from './supervisor.types.ts';

/** What commit needs besides the event: whether it created the run, and the run's state before it (`stateRefsOf`). */
interface EntryExtra {
  isNewRun: boolean;
  newRun?: NewRun;
  before?: unknown[];
}

export { SNAPSHOT_VERSION } from './snapshot-migration.ts';

/** An event as callers hand it in; the supervisor stamps the receive time when it is absent. */
export type IncomingRunEvent = RunEvent extends infer E ? (E extends { at: number } ? Omit<E, 'at'> & { at?: number } : never) : never;

/**
 * Owns the run actors of this coordinator. Every accepted event is journaled with the timer changes
 * and effects it produced, and its state stored (as a snapshot, or by the journal row alone:
 * snapshot-policy.ts), in one group-committed transaction; timers are armed and effects run only
 * after that commit (docs/architecture.md#time-durable-deadlines).
 */
export class Supervisor {
  private readonly runs = new Map<string, RunHandle>();
  /** Runs whose creating entry is not durable yet: a second `createRun` of one waits for the first. */
  private readonly creating = new Map<string, Promise<void>>();
  private readonly machine: RuntimeRunMachine;
  private readonly timers: TimerService;
  private readonly committer: GroupCommitter;
  private fenced: FencedError | null = null;
  private halted = false;
  private readonly observers: CommitObservers;
  private deferTimers = false;
  private readonly deferredTimers = new Map<string, Omit<ArmedTimer, 'runId'>[]>();
  /** Runs released after the database refused their writes: restored here after the next commit that succeeds. */
  private readonly released = new Set<string>();
  private readonly crashes = new CrashObserver(() => this.dropCrashed());
  private readonly actors = new RunActorHost({ restored: (runId) => this.waiting.touch(runId), stopped: (runId) => this.waiting.gone(runId) });
  private readonly waiting = new WaitingTally((runId) => waitingKindsOf(this.runs.get(runId)));
  private readonly recorder = new IntentRecorder((runId) => this.waiting.touch(runId));

  constructor(private readonly options: SupervisorOptions) {
    this.machine = runtimeRunMachine(this.recorder.sink);
    this.observers = new CommitObservers(options.log);
    this.timers = new TimerService(options.clock, (timer) =>
      deliverDeadline({ owns: (runId) => this.runs.has(runId), send: (runId, event) => this.send(runId, event as IncomingRunEvent), ...options }, timer),
    );
    this.committer = new GroupCommitter({
      commit: (entries) => options.store.commit(entries),
      failRuns: (records) => options.store.failRuns(records),
      ...{ maxBatch: options.maxBatch, batching: options.batching, clock: options.clock, log: options.log },
      ...(options.commitRetry ? { retry: options.commitRetry } : {}),
      observer: {
        onBatch: (size, seconds) => {
          options.metrics.batchSize.observe(size);
          options.metrics.commitSeconds.observe(seconds);
          if (this.released.size > 0) void this.restoreReleased();
        },
        onRetry: () => options.metrics.commitRetries.inc(),
      },
      onFenced: (error) => this.fence(error),
      ...(options.traces && { onFlush: (runIds: readonly string[]) => runIds.forEach((runId) => options.traces?.mark(runId, 'commit.queued')) }),
      onGiveUp: (runId, error) => this.dropRun(runId, error),
    });
  }

  get size(): number {
    return this.runs.size;
  }

  get timersArmed(): number {
    return this.timers.size;
  }

  /** Calls `listener` after every committed event; returns the unsubscribe function. */
  observe(listener: (update: CommittedUpdate) => void): () => void {
    return this.observers.add(listener);
  }

  owns(runId: string): boolean {
    return this.runs.has(runId);
  }

  ownedRunIds(): string[] {
    return [...this.runs.keys()];
  }

  /** The live snapshot of an owned run (JSON form), or null. */
  snapshotOf(runId: string): PersistedMachineSnapshot<RunContext> | null {
    const handle = this.runs.get(runId);
    return handle ? persistedOf(handle.actor) : null;
  }

  /** A job's live context, when its run is owned here (read-only; for building messages). */
  jobContext(runId: string, jobKey: string): JobContext | null {
    const child = this.runs.get(runId)?.actor.getSnapshot().children[jobKey];
    return child ? (child.getSnapshot() as { context: JobContext }).context : null;
  }

  /** Whether a job of an owned run is in a state its chart tags `tag` (`waits-for-agent`, `holds-slot`, ...). */
  jobHasTag(runId: string, jobKey: string, tag: JobTag): boolean {
    const child = this.runs.get(runId)?.actor.getSnapshot().children[jobKey];
    return child?.getSnapshot().hasTag(tag) ?? false;
  }

  /** Every open job of an owned run with its context (read-only); what state it is in, ask with `jobHasTag`. */
  jobsOf(runId: string): { jobKey: string; context: JobContext }[] {
    const handle = this.runs.get(runId);
    const jobs: { jobKey: string; context: JobContext }[] = [];
    if (handle) visitOpenJobs(handle, (jobKey, context) => jobs.push({ jobKey, context }));
    return jobs;
  }

  /** Jobs of the runs owned here that wait, by the kind of their waiting reason (a metrics scrape reads it). */
  waitingCounts(): ReadonlyMap<string, number> {
    return this.waiting.counts();
  }

  /**
   * Creates the run actor and resolves once its first snapshot is durable (RUN-2), or with the creation
   * already under way. A failed creation leaves memory, so a retry creates the run anew instead of
   * finding an actor with nothing stored (a delivery was once marked processed with no run).
   */
  async createRun(newRun: NewRun): Promise<void> {
    this.assertRunning();
    const { runId } = newRun.input;
    if (this.runs.has(runId)) return this.creating.get(runId);
    const creation = this.create(newRun).finally(() => this.creating.delete(runId));
    this.creating.set(runId, creation);
    return creation;
  }

  private async create(newRun: NewRun): Promise<void> {
    const { runId } = newRun.input;
    const actor = this.actors.create(this.machine, newRun.input, runId);
    actor.subscribe(this.crashes);
    const recorded = this.recorder.record(runId, () => actor.start());
    this.options.traces?.mark(runId, 'actor.started');
    const handle: RunHandle = { actor, seq: 0, storedSeq: 0, snapshotBytes: 0, tailBytes: 0, written: new Map(), closing: false };
    this.runs.set(runId, handle);
    // A crash inside start() reached the observer before the run was registered.
    if (actor.getSnapshot().status === 'error') this.dropCrashed();
    const created = { type: 'run.created', input: newRun.input, at: newRun.input.createdAt };
    this.logOf(runId).info({ workflow: newRun.input.workflowName, jobs: newRun.input.jobs.length }, 'run created');
    try {
      await this.commit(handle, runId, created, this.answerPlacements(handle, runId, recorded, created.at), { isNewRun: true, newRun });
    } catch (thrown) {
      if (this.runs.get(runId) === handle) this.forget(runId, handle);
      throw thrown;
    }
  }

  /** Delivers one event to the owning run actor; resolves when the event is durable. */
  async send(runId: string, incoming: IncomingRunEvent): Promise<void> {
    this.assertRunning();
    // An event for a run still being created waits for its creation: a first entry that waits for its cause is not queued yet.
    const creating = this.creating.get(runId);
    if (creating) await creating.catch(() => undefined);
    const handle = this.runs.get(runId);
    if (!handle || handle.closing) throw new RunNotOwnedError(runId);
    const event = { ...incoming, at: incoming.at ?? this.options.clock.now() };
    handle.seq += 1;
    const before = stateRefsOf(handle.actor);
    const recorded = this.recorder.record(runId, () => handle.actor.send(event));
    this.options.metrics.actorEvents.inc();
    await this.commit(handle, runId, event, this.answerPlacements(handle, runId, recorded, event.at), { isNewRun: false, before });
  }

  /** Restores runs from stored snapshots; a snapshot this build cannot read is refused, not guessed. */
  restore(stored: StoredRun[], options: { deferTimers?: boolean } = {}): RestoreReport {
    this.deferTimers = options.deferTimers === true;
    this.assertRunning();
    const report: RestoreReport = { restored: [], refused: [] };
    for (const row of stored) {
      if (this.runs.has(row.runId)) continue;
      try {
        if (this.restoreOne(row)) report.restored.push(row.runId);
      } catch (thrown) {
        const error = coerceError(thrown);
        this.options.metrics.restoreFailures.inc();
        this.options.log.error({ runId: row.runId, err: error }, 'run restore refused');
        report.refused.push({ runId: row.runId, error });
        if (!(error instanceof UnknownMachineVersionError)) this.failUnrestorable(row, error);
      }
    }
    this.options.metrics.actorsAlive.set(this.runs.size);
    this.options.metrics.timersArmed.set(this.timers.size);
    return report;
  }

  /** Stops every actor without writing anything (shutdown, or after losing ownership). */
  stopAll(): void {
    this.halted = true;
    this.released.clear();
    this.committer.stop(this.fenced ?? new SupervisorStoppedError());
    this.timers.stop();
    for (const handle of this.runs.values()) this.actors.stop(handle.actor);
    this.runs.clear();
    this.options.metrics.actorsAlive.set(0);
    this.options.metrics.timersArmed.set(0);
  }

  private restoreOne(row: StoredRun): boolean {
    // A snapshot of an earlier release is read in this one's format (snapshot-migration.ts); one no step reaches is refused.
    const migrated = row.machineId === RUN_MACHINE_ID ? migrateSnapshot(row.machineVersion, row.snapshot) : null;
    if (migrated === null) throw new UnknownMachineVersionError(row.runId, row.machineId, row.machineVersion, SNAPSHOT_VERSION);
    const persisted = migrated as PersistedMachineSnapshot<RunContext>;
    if (persisted.status !== 'active') return false;
    const actor = this.actors.restore(this.machine, persisted, row.runId);
    actor.subscribe(this.crashes);
    actor.start();
    // The tail's intents were answered when its events were live: its deadlines and effects are the stored rows.
    for (const record of row.tail ?? []) this.recorder.record(row.runId, () => actor.send(record.event as RunEvent));
    const seq = journalHeadOf(row);
    this.runs.set(row.runId, { actor, seq, storedSeq: row.seq, snapshotBytes: 0, tailBytes: 0, written: new Map(), closing: false });
    const started = actor.getSnapshot();
    if (started.status === 'error') {
      this.dropCrashed();
      throw coerceError(started.error);
    }
    const { timers, effects, unknownKinds } = restoredWorkOf(row);
    if (unknownKinds.length > 0) this.logOf(row.runId).error({ unknownKinds }, 'stored rows of kinds this build does not know; left untouched');
    if (this.deferTimers) this.deferredTimers.set(row.runId, timers);
    else for (const timer of timers) this.timers.arm({ runId: row.runId, ...timer });
    if (effects.length > 0) this.options.executeEffects(effects.map((effect) => ({ ...effect, runId: row.runId })));
    // One line per run at debug: an adoption's summary ('runs restored') is logged at info, and 10,000
    // lines of it cost a takeover 4% of its time.
    if (this.options.log.isLevelEnabled('debug')) {
      this.logOf(row.runId).debug({ seq, replayed: row.tail?.length ?? 0, timers: row.timers.length, effects: row.pendingEffects.length }, 'run restored');
    }
    return true;
  }

  /**
   * A snapshot of this build's own version that its chart cannot restore fails its run with the
   * reason: no build would restore it, and left as stored it would show running with no actor. (One
   * of another version is left as stored for the build that reads it.)
   */
  private failUnrestorable(row: StoredRun, error: Error): void {
    const failure = unrestorableFailureOf(row, error, this.options.clock.now());
    // Rejects with RunNotStorableError once the failure is durable; the give-up is logged where it is handled.
    this.committer.failRun(failure).catch(() => undefined);
  }

  /**
   * Arms the deadlines of runs restored with `deferTimers`, once what the old process knew has been
   * re-established (agents' liveness): a deadline the runs disarmed meanwhile is not armed again.
   */
  armDeferredTimers(runIds: readonly string[]): void {
    for (const runId of runIds) {
      const timers = this.deferredTimers.get(runId) ?? [];
      this.deferredTimers.delete(runId);
      const handle = this.runs.get(runId);
      if (!handle) continue;
      const armed = armedDeadlines(handle.actor);
      for (const timer of timers) if (armed.get(timer.deadlineId) === timer.dueAt) this.timers.arm({ runId, ...timer });
    }
    this.options.metrics.timersArmed.set(this.timers.size);
  }

  /** A run's logger, made when it logs: one kept per live run cost 0.3 KB of each. */
  private logOf(runId: string): Logger {
    return this.options.log.child({ runId });
  }

  /** Run actors that crashed (an action threw) leave memory as last committed. */
  private dropCrashed(): void {
    for (const [runId, handle] of this.runs) {
      const snapshot = handle.actor.getSnapshot();
      if (snapshot.status !== 'error') continue;
      this.logOf(runId).error({ err: coerceError(snapshot.error) }, 'run actor crashed; it is stopped and left as last committed');
      this.runs.delete(runId);
      this.waiting.gone(runId);
      this.timers.disarmRun(runId);
    }
  }

  /** Placement requests the dispatcher can answer at once are answered in the same entry (docs/architecture.md#placement-in-the-same-entry). */
  private answerPlacements(handle: RunHandle, runId: string, intents: Intent[], at: number): InlineGrants {
    // The closures are made only for an entry that asks for placement: every other event skips them.
    const placing = () => ({
      ...{ runId, closing: handle.closing },
      send: (answer: object) => this.recorder.record(runId, () => handle.actor.send(answer as RunEvent)),
      nextSeq: () => (handle.seq += 1),
      stateAfter: () => liveStateSummary(handle.actor),
    });
    return answerPlacements(this.options.inlinePlacement, { closing: handle.closing, placing }, intents, at);
  }

  private async commit(
    handle: RunHandle,
    runId: string,
    event: { type: string; at: number },
    answered: InlineGrants,
    extra: EntryExtra,
  ): Promise<void> {
    // A grant made in this entry gives its slot back if the entry is never stored.
    const undoGrants = (thrown: unknown) => {
      for (const grant of answered.grants) this.options.inlinePlacement?.undo(grant);
      throw thrown;
    };
    const current = handle.actor.getSnapshot();
    if (current.status === 'error') {
      this.close(runId, handle);
      const crash = { runId, seq: handle.seq, machineVersion: SNAPSHOT_VERSION, error: current.error, context: current.context as RunContext | undefined, newRun: extra.newRun };
      if (extra.newRun?.recordedCause) await causeRecorded(runId, extra.newRun.recordedCause).catch(undoGrants);
      // Rejects with RunNotStorableError once the run is failed in the database.
      await this.committer.failRun(crashFailureOf(crash, this.options.clock.now())).catch(undoGrants);
      return;
    }
    const { entry, done } = this.entryOf(handle, runId, event, answered, extra);
    if (done) this.close(runId, handle);
    const serialized = this.serialize(handle, entry);
    if (serialized instanceof UnstorableEntryError) {
      this.close(runId, handle);
      if (extra.newRun?.recordedCause) await causeRecorded(runId, extra.newRun.recordedCause).catch(undoGrants);
      // Rejects with RunNotStorableError once the run is failed in the database.
      await this.committer.failRun(runFailureOf(entry, `its state could not be stored: ${serialized.message}`, this.options.clock.now())).catch(undoGrants);
      return;
    }
    if (extra.isNewRun) this.options.traces?.mark(runId, 'entry.built');
    if (extra.newRun?.recordedCause) await causeRecorded(runId, extra.newRun.recordedCause).catch(undoGrants);
    if (extra.isNewRun) this.options.traces?.mark(runId, 'cause.recorded');
    const submitted = this.committer.submit(serialized);
    const effects = entry.effects.map((effect) => ({ ...effect, runId }));
    if (effects.length > 0) this.options.onSubmitted?.(effects);
    await submitted.catch((thrown: unknown) => {
      if (effects.length > 0) this.options.onNotCommitted?.(effects);
      return undoGrants(thrown);
    });
    if (extra.isNewRun) this.options.traces?.mark(runId, 'run.committed');
    if (done) this.retire(runId, handle);
    this.afterCommit(runId, entry, effects);
  }

  /** What `event` writes (commit-plan.ts says what, this carries it out), and whether it finished the run. */
  private entryOf(handle: RunHandle, runId: string, event: { type: string; at: number }, answered: InlineGrants, extra: EntryExtra): { entry: RunCommit; done: boolean } {
    const { intents, followUps, firstStateAfter } = answered;
    const { before, ...creation } = extra;
    const seq = handle.seq;
    const timerEvent = event.type.startsWith('timer.') && 'deadlineId' in event ? String(event.deadlineId) : null;
    const done = handle.actor.getSnapshot().status === 'done';
    const plan = planEntry(
      {
        ...{ firesDeadline: timerEvent !== null, stateUnchanged: before !== undefined && sameRefs(before, stateRefsOf(handle.actor)) },
        ...{ asksDurable: followUps.length > 0 || !asksNothingDurable(intents), tail: seq - handle.storedSeq },
        ...{ isNewRun: creation.isNewRun === true, runDone: done, closing: handle.closing },
      },
      handle,
    );
    const deferSnapshot = plan.snapshot === 'defer';
    if (!deferSnapshot) handle.storedSeq = seq;
    if (plan.write === 'journal') {
      const unchanged = { runId, seq, event, intents, machineVersion: SNAPSHOT_VERSION, live: handle.actor.getSnapshot(), stateAfter: liveStateSummary(handle.actor), deferSnapshot };
      return { entry: unchangedEntry(unchanged), done: false };
    }
    const state = deferSnapshot ? deferredState(handle.actor, handle.written) : storedState(persistedOf(handle.actor), changedJobs(handle.actor, handle.written));
    const firedDeadlineId = timerEvent !== null && !rearmedSince(handle.actor, timerEvent, event) ? timerEvent : null;
    const parts = { runId, seq, event, intents, state, machineVersion: SNAPSHOT_VERSION, firedDeadlineId, followUps, firstStateAfter };
    return { entry: buildCommitEntry({ ...parts, ...creation }), done };
  }

  /** The entry as it will be stored, with only the jobs it changed, or why it cannot be. */
  private serialize(handle: RunHandle, entry: CommitEntry): SerializedEntry | UnstorableEntryError {
    let serialized: SerializedEntry;
    try {
      serialized = this.options.store.serialize({ ...entry, effects: storedEffects(entry.effects) });
    } catch (thrown) {
      if (!(thrown instanceof UnstorableEntryError)) throw thrown;
      this.logOf(entry.runId).error({ err: thrown, seq: entry.snapshot.seq }, 'run entry cannot be serialized; failing the run');
      return thrown;
    }
    noteSerialized(handle, serialized);
    const children = handle.actor.getSnapshot().children;
    serialized.jobs = jobRowsToWrite(serialized.jobs, handle.written, (jobKey) => children[jobKey]?.getSnapshot());
    return serialized;
  }

  /** `effects` are the entry's, each carrying its run id. */
  private afterCommit(runId: string, entry: RunCommit, effects: Effect[]): void {
    if (this.fenced) return;
    for (const change of entry.timers) {
      if (change.op === 'disarm') this.timers.disarm(runId, change.deadlineId);
      else if (this.runs.get(runId)?.closing === false) this.timers.arm({ runId, ...change });
    }
    this.options.metrics.timersArmed.set(this.timers.size);
    if (effects.length > 0) this.options.executeEffects(effects);
    this.options.onCommitted?.(entry);
    this.observers.notify(entry);
  }

  /** A finished or failing run takes no more events and arms no more deadlines (G-2). */
  private close(runId: string, handle: RunHandle): void {
    handle.closing = true;
    this.timers.disarmRun(runId);
    this.options.metrics.timersArmed.set(this.timers.size);
  }

  /** A finished run leaves memory once its final entry is durable: nothing can move it any more (G-2). */
  private retire(runId: string, handle: RunHandle): void {
    if (this.runs.get(runId) !== handle) return;
    this.forget(runId, handle);
    this.logOf(runId).info({ state: handle.actor.getSnapshot().value }, 'run finished');
  }

  /** The actor leaves memory without a word to the database. */
  private forget(runId: string, handle: RunHandle): void {
    this.runs.delete(runId);
    this.timers.disarmRun(runId);
    this.actors.stop(handle.actor);
    this.options.metrics.actorsAlive.set(this.runs.size);
    this.options.metrics.timersArmed.set(this.timers.size);
  }

  /**
   * The committer gave up a run's writes: its actor stops and leaves memory. Failed: the database
   * holds it as failed with the reason. Released: nothing was stored; a restorable run is brought
   * back from its last durable state after the next successful commit, else at restart or adoption.
   */
  private dropRun(runId: string, error: GiveUp): void {
    const handle = this.runs.get(runId);
    if (handle) this.forget(runId, handle);
    const log = this.logOf(runId);
    if (error instanceof RunNotStorableError) {
      log.error({ reason: error.reason }, 'run failed: its state could not be stored');
      this.options.metrics.commitGiveUps.inc({ outcome: 'failed' });
      const event = { type: 'run.storage.failed', reason: error.reason };
      this.observers.notify({ runId, events: [{ seq: handle?.seq ?? -1, event, receivedAt: this.options.clock.now(), stateAfter: null }], run: { status: 'failed' } });
    } else {
      log.error({ err: error.cause, restorable: error.restorable }, 'run released: its writes were given up and it stays at its last durable state');
      this.options.metrics.commitGiveUps.inc({ outcome: 'released' });
      if (error.restorable) this.released.add(runId);
    }
  }

  /** Brings released runs back from the database once a commit went through again. */
  private async restoreReleased(): Promise<void> {
    const runIds = [...this.released].filter((runId) => !this.runs.has(runId));
    this.released.clear();
    if (runIds.length === 0 || this.halted) return;
    try {
      const report = this.restore(await this.options.store.loadRuns(runIds));
      this.options.log.warn({ restored: report.restored.length, refused: report.refused.length }, 'released runs restored from their last durable state');
    } catch (thrown) {
      for (const runId of runIds) this.released.add(runId);
      this.options.log.warn({ err: coerceError(thrown), runs: runIds.length }, 'restoring released runs failed; retrying after the next commit');
    }
  }

  private fence(error: FencedError): void {
    this.options.log.error({ err: error }, 'ownership lost: stopping every run actor, writing nothing more');
    this.fenced = error;
    this.stopAll();
    this.options.onFenced(error);
  }

  private assertRunning(): void {
    if (this.fenced) throw this.fenced;
    if (this.halted) throw new SupervisorStoppedError();
  }
}
