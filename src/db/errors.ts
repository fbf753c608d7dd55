/** Fencing is the runtime's error; the queries throw it (one class, whichever layer catches it). */
export { FencedError } from '../../actors/errors.ts';

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

/**
 * The embedded Postgres data directory is in use by another live coordinator process. Stop that
 * coordinator, or give this one its own SWITCHYARD_DATA_DIR or a DATABASE_URL.
 */
export class DataDirInUseError extends Error {
  override readonly name = 'DataDirInUseError';

  constructor(
    readonly dataDir: string,
    readonly ownerPid: number,
  ) {
    super(
      `Data directory ${dataDir} is in use by another Switchyard process (pid ${ownerPid}); ` +
        'stop it first, or set SWITCHYARD_DATA_DIR or DATABASE_URL for this one',
    );
  }
}

/** The embedded Postgres server did not start; `output` holds the last lines it printed. */
export class EmbeddedPostgresStartError extends Error {
  override readonly name = 'EmbeddedPostgresStartError';

  constructor(
    readonly dataDir: string,
    readonly output: string,
  ) {
    super(`Embedded Postgres in ${dataDir} failed to start:\n${output}`);
  }
}
