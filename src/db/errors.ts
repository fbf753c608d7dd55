import { PermanentStoreError, TransientStoreError } from '../../actors/runs/errors.ts';
import { coerceError } from '../../lib/errors.ts';

/** Fencing and the store's error classes are the runtime's; the queries throw them (one class, whichever layer catches it). */
export { FencedError, JournalConflictError, PermanentStoreError, TransientStoreError, UnstorableEntryError } from '../../actors/runs/errors.ts';

/**
 * SQLSTATE classes and codes after which the same statement can succeed later: connection
 * exceptions, transaction rollbacks (serialization failure, deadlock), insufficient resources
 * (too many connections), operator intervention (admin or crash shutdown, cancel), system errors.
 */
const TRANSIENT_CLASSES = new Set(['08', '40', '53', '57', '58']);
const TRANSIENT_CODES = new Set(['55P03', '55006', '25006', '25P03']);
/** 57P04: the database was dropped; retrying cannot help. */
const PERMANENT_CODES = new Set(['57P04']);
/** Errors of the socket or the driver, with no SQLSTATE: the statement never reached a verdict. */
const NETWORK_CODES = new Set(['ECONNRESET', 'ECONNREFUSED', 'ETIMEDOUT', 'EPIPE', 'EHOSTUNREACH', 'ENETUNREACH', 'EAI_AGAIN', 'ENOTFOUND']);
const DRIVER_MESSAGES = /Connection terminated|connection error|not queryable|timeout exceeded when trying to connect|Client was closed/i;

function codeOf(error: Error): string | null {
  return 'code' in error && typeof error.code === 'string' ? error.code : null;
}

/**
 * Sorts an error of a write into TransientStoreError (retry with backoff) or PermanentStoreError
 * (the rows themselves are refused: data exception 22, constraint 23, limit 54, syntax 42...).
 */
export function classifyDatabaseError(thrown: unknown): TransientStoreError | PermanentStoreError {
  const error = coerceError(thrown);
  const code = codeOf(error);
  if (code !== null && /^[0-9A-Z]{5}$/.test(code)) {
    if (PERMANENT_CODES.has(code)) return new PermanentStoreError(code, error);
    const transient = TRANSIENT_CODES.has(code) || TRANSIENT_CLASSES.has(code.slice(0, 2));
    return transient ? new TransientStoreError(code, error) : new PermanentStoreError(code, error);
  }
  if ((code !== null && NETWORK_CODES.has(code)) || DRIVER_MESSAGES.test(error.message)) return new TransientStoreError(code, error);
  return new PermanentStoreError(code, error);
}

/** Whether the same statement may succeed if tried again (a reset connection, a serialization failure): `classifyDatabaseError` says transient. */
export function isTransientDatabaseError(thrown: unknown): boolean {
  return classifyDatabaseError(thrown) instanceof TransientStoreError;
}

/**
 * Waits between attempts of a start-up statement cut off by a transient database error (a connection
 * terminated, Postgres restarting): about 16 s in all before a coordinator gives up starting.
 */
export const START_RETRY_WAITS_MS: readonly number[] = [100, 250, 500, 1_000, 2_000, 4_000, 8_000];

/** Told of each failure that will be tried again: the error, the attempt that failed (from 1), the wait before the next. */
export type OnRetry = (error: unknown, attempt: number, waitMs: number) => void;

/** `attempt`, tried again after each wait while it fails with a transient database error; the last failure is thrown. */
export async function retryingTransient<T>(attempt: () => Promise<T>, waitsMs: readonly number[], onRetry?: OnRetry): Promise<T> {
  for (const [index, waitMs] of waitsMs.entries()) {
    try {
      return await attempt();
    } catch (thrown) {
      if (!isTransientDatabaseError(thrown)) throw thrown;
      onRetry?.(thrown, index + 1, waitMs);
      await new Promise((resolve) => setTimeout(resolve, waitMs));
    }
  }
  return attempt();
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

/** `SWITCHYARD_EMBEDDED_PG_PORT` names a port something else listens on; nothing is started. */
export class EmbeddedPostgresPortInUseError extends Error {
  override readonly name = 'EmbeddedPostgresPortInUseError';

  constructor(
    readonly port: number,
    readonly host: string,
  ) {
    super(
      `SWITCHYARD_EMBEDDED_PG_PORT=${port}: port ${port} on ${host} is already in use; ` +
        'stop what listens there, choose another port, or unset SWITCHYARD_EMBEDDED_PG_PORT to use a free one',
    );
  }
}
