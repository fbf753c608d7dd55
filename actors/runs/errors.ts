/** This coordinator lost ownership: its epoch changed. It must stop its actors and write nothing more. */
export class FencedError extends Error {
  override readonly name = 'FencedError';
  constructor(
    readonly coordinatorId: string,
    readonly epoch: number,
    detail = 'coordinator epoch changed',
  ) {
    super(`coordinator ${coordinatorId} (epoch ${epoch}) is fenced: ${detail}`);
  }
}

/**
 * A batch tried to append an event at a (run, seq) that is already journaled, so it would be applied
 * twice. The whole batch was rolled back; the run actor's state is ahead of or behind the journal
 * and must be restored from its snapshot.
 */
export class JournalConflictError extends Error {
  override readonly name = 'JournalConflictError';

  constructor(readonly detail: string) {
    super(`Journal conflict, batch rolled back: ${detail}`);
  }
}

/** The supervisor was stopped (shutdown or lost ownership); it accepts no more events. */
export class SupervisorStoppedError extends Error {
  override readonly name = 'SupervisorStoppedError';
  constructor() {
    super('the supervisor is stopped and accepts no more events');
  }
}

/** A run made ready while what it comes from (its delivery) was being recorded, which was not stored: nothing of the run was written. */
export class RunCauseNotRecordedError extends Error {
  override readonly name = 'RunCauseNotRecordedError';
  constructor(readonly runId: string) {
    super(`run ${runId} was not created: what it comes from was not recorded`);
  }
}

/** A new run whose cause is being recorded writes nothing before it is, and is not created when it was not (`NewRun.recordedCause`). */
export async function causeRecorded(runId: string, recordedCause: Promise<boolean>): Promise<void> {
  if (!(await recordedCause)) throw new RunCauseNotRecordedError(runId);
}

/** The run is not owned by this coordinator (never created here, finished, or adopted elsewhere). */
export class RunNotOwnedError extends Error {
  override readonly name = 'RunNotOwnedError';
  constructor(readonly runId: string) {
    super(`run ${runId} is not owned by this coordinator`);
  }
}

/** A stored snapshot was written by a machine version this build cannot read (docs/architecture.md#ownership-leases-epochs-fencing-and-adoption). */
export class UnknownMachineVersionError extends Error {
  override readonly name = 'UnknownMachineVersionError';
  constructor(
    readonly runId: string,
    readonly machineId: string,
    readonly machineVersion: number,
    readonly supported: number,
  ) {
    super(
      `run ${runId}: snapshot of machine ${machineId} version ${machineVersion} cannot be restored by this build (supports version ${supported}); the run is left as stored`,
    );
  }
}

/** Part of an entry cannot be written as JSON (nested too deeply, a BigInt, a cycle): its run is failed at submit. */
export class UnstorableEntryError extends Error {
  override readonly name = 'UnstorableEntryError';
  constructor(
    readonly runId: string,
    readonly seq: number,
    readonly part: string,
    readonly detail: string,
  ) {
    super(`the ${part} at seq ${seq} cannot be stored as JSON: ${detail}`);
  }
}

/** The database cannot take a write right now (connection lost, deadlock, shutdown...): retried with backoff, up to a bound. */
export class TransientStoreError extends Error {
  override readonly name = 'TransientStoreError';
  constructor(
    readonly code: string | null,
    cause: Error,
  ) {
    super(`database unavailable${code ? ` (${code})` : ''}: ${cause.message}`, { cause });
  }
}

/** The database refused the rows themselves (a data exception, a limit): the same write fails again, so it is not retried as is. */
export class PermanentStoreError extends Error {
  override readonly name = 'PermanentStoreError';
  constructor(
    readonly code: string | null,
    cause: Error,
  ) {
    super(`database refused the write${code ? ` (${code})` : ''}: ${cause.message}`, { cause });
  }
}

/** The run was failed because its state could not be stored; the database holds it as failed with `reason`. */
export class RunNotStorableError extends Error {
  override readonly name = 'RunNotStorableError';
  constructor(
    readonly runId: string,
    readonly reason: string,
  ) {
    super(`run ${runId} failed: ${reason}`);
  }
}

/**
 * A run's write was given up without storing anything (the database refused every attempt, or the
 * journal already holds that seq). The run left memory; the database keeps its last durable state.
 */
export class CommitGaveUpError extends Error {
  override readonly name = 'CommitGaveUpError';
  constructor(
    readonly runId: string,
    cause: Error,
    /** True when the run may be restored from the database here once writes succeed again. */
    readonly restorable: boolean,
  ) {
    super(`run ${runId}: its write was given up, nothing stored (${cause.message}); it stays at its last durable state`, { cause });
  }
}
