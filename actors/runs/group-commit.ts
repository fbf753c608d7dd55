import type { Logger } from 'pino';
import type { RunFailureRecord, SerializedEntry } from './ports.ts';
import type { Clock } from '../clock.ts';
import { runFailureOf } from './commit-entry.ts';
import { CommitGaveUpError, FencedError, JournalConflictError, RunNotStorableError, TransientStoreError } from './errors.ts';
import { coerceError } from '../../lib/errors.ts';
import { backoffMs } from '../../lib/backoff.ts';

export interface CommitObserver {
  onBatch(size: number, seconds: number): void;
  onRetry?(attempt: number, delayMs: number, error: Error): void;
}

/** How long a transient database error is retried before the batch is taken apart. */
export interface CommitRetryPolicy {
  /** Attempts of one batch (and of one failure record) in all. @default 12 */
  attempts: number;
  /** First backoff, doubled after each failed attempt. @default 50 */
  baseMs: number;
  /** Longest backoff. @default 5000 (so the default bound waits about 26 s in all) */
  maxMs: number;
}

export const DEFAULT_COMMIT_RETRY: CommitRetryPolicy = { attempts: 12, baseMs: 50, maxMs: 5_000 };

type Work = { entry: SerializedEntry } | { failure: RunFailureRecord };

interface Pending {
  runId: string;
  work: Work;
  resolve: () => void;
  reject: (error: Error) => void;
}

export type GiveUp = RunNotStorableError | CommitGaveUpError;

export interface GroupCommitOptions {
  commit: (entries: SerializedEntry[]) => Promise<void>;
  failRuns: (records: RunFailureRecord[]) => Promise<void>;
  /** Largest number of entries in one transaction. */
  maxBatch: number;
  /** Off: one transaction per entry (the comparison mode of the benchmark). */
  batching: boolean;
  clock: Clock;
  log: Logger;
  observer?: CommitObserver;
  retry?: CommitRetryPolicy;
  onFenced: (error: FencedError) => void;
  /** The runs of a batch whose transaction starts now (the stage budget: lib/stage-trace.ts). */
  onFlush?: (runIds: readonly string[]) => void;
  /** A run's writes were given up; every write of it still pending is rejected with `error`. */
  onGiveUp: (runId: string, error: GiveUp) => void;
}

/**
 * Group commit: entries submitted while a transaction is in flight go together in the next
 * one, so throughput grows with batch size instead of with fsync count. Order is kept. A batch
 * that fails with a transient error is retried with backoff up to a bound; one that fails for any
 * other reason, or past the bound, is taken apart (`isolate`). A fenced one rejects everything.
 */
export class GroupCommitter {
  private queue: Pending[] = [];
  private flushing = false;
  private stopped: Error | null = null;
  private failures = 0;
  private readonly retry: CommitRetryPolicy;

  constructor(private readonly options: GroupCommitOptions) {
    this.retry = options.retry ?? DEFAULT_COMMIT_RETRY;
  }

  /** Resolves once the entry is durable. */
  submit(entry: SerializedEntry): Promise<void> {
    return this.enqueue(entry.runId, { entry });
  }

  /**
   * Fails a run in place of an entry that could not be serialized, after its earlier entries.
   * Always rejects: RunNotStorableError once the failure is durable, else CommitGaveUpError.
   */
  failRun(record: RunFailureRecord): Promise<void> {
    return this.enqueue(record.runId, { failure: record });
  }

  /** Stops committing: everything queued is rejected with `reason`, and so is every later submit. */
  stop(reason: Error): void {
    this.stopped ??= reason;
    for (const pending of this.queue.splice(0)) pending.reject(reason);
  }

  get pending(): number {
    return this.queue.length;
  }

  private enqueue(runId: string, work: Work): Promise<void> {
    if (this.stopped) return Promise.reject(this.stopped);
    return new Promise((resolve, reject) => {
      this.queue.push({ runId, work, resolve, reject });
      if (!this.flushing) this.scheduleFlush(0);
    });
  }

  /**
   * At once (`delayMs` 0): once the code that submitted has run, so what it submits in the same turn
   * goes in one transaction; an entry that finds nothing in flight does not wait a turn of the event
   * loop. Entries submitted while a transaction is in flight go in the next one (`continueFlushing`).
   */
  private scheduleFlush(delayMs: number): void {
    this.flushing = true;
    if (delayMs === 0) queueMicrotask(() => void this.flush());
    else this.options.clock.setTimeout(() => void this.flush(), delayMs);
  }

  private backoff(failures: number): number {
    return backoffMs(failures, this.retry);
  }

  /** The longest run of entries (or of failure records) at the head of the queue, up to the batch size. */
  private nextBatch(): Pending[] {
    const size = this.options.batching ? this.options.maxBatch : 1;
    const kind = (p: Pending) => 'entry' in p.work;
    const head = this.queue[0];
    const batch: Pending[] = [];
    for (const pending of this.queue) {
      if (batch.length >= size || head === undefined || kind(pending) !== kind(head)) break;
      batch.push(pending);
    }
    return batch;
  }

  private async attempt(batch: readonly Pending[]): Promise<Error | null> {
    const entries = batch.flatMap((p) => ('entry' in p.work ? [p.work.entry] : []));
    const records = batch.flatMap((p) => ('failure' in p.work ? [p.work.failure] : []));
    try {
      if (entries.length > 0) await this.options.commit(entries);
      if (records.length > 0) await this.options.failRuns(records);
      return null;
    } catch (thrown) {
      return coerceError(thrown);
    }
  }

  private async flush(): Promise<void> {
    const batch = this.stopped ? [] : this.nextBatch();
    if (batch.length === 0) {
      this.flushing = false;
      return;
    }
    const started = performance.now();
    this.options.onFlush?.(batch.map((pending) => pending.runId));
    const error = await this.attempt(batch);
    if (this.stopped) {
      this.flushing = false;
      return;
    }
    if (error === null) {
      this.failures = 0;
      this.queue.splice(0, batch.length);
      this.options.observer?.onBatch(batch.length, (performance.now() - started) / 1000);
      // With more to send, that goes first and the committed entries settle on the next turn; with nothing, at once.
      // (Failure records settle first: their runs' later writes still queued are given up with them.)
      if (this.queue.length > 0 && batch.every((pending) => 'entry' in pending.work)) {
        this.continueFlushing();
        setImmediate(() => this.settleCommitted(batch));
        return;
      }
      this.settleCommitted(batch);
    } else if (error instanceof FencedError) {
      this.fence(error);
      return;
    } else if (error instanceof TransientStoreError && this.failures + 1 < this.retry.attempts) {
      this.retryLater(batch, error);
      return;
    } else {
      this.failures = 0;
      this.queue.splice(0, batch.length);
      await this.isolate(batch, error);
    }
    this.continueFlushing();
  }

  /**
   * Sends the next batch at once, before the one just committed is settled: the database works on
   * it while this thread runs what the settled entries release (their effects, the next events).
   */
  private continueFlushing(): void {
    if (this.queue.length > 0 && !this.stopped) void this.flush();
    else this.flushing = false;
  }

  private retryLater(batch: Pending[], error: TransientStoreError): void {
    this.failures += 1;
    const delay = this.backoff(this.failures);
    const { attempts } = this.retry;
    this.options.log.warn({ err: error, batchSize: batch.length, attempt: this.failures, of: attempts, retryInMs: delay }, 'commit failed; retrying');
    this.options.observer?.onRetry?.(this.failures, delay, error);
    this.scheduleFlush(delay);
  }

  private settleCommitted(batch: readonly Pending[]): void {
    for (const pending of batch) {
      if ('entry' in pending.work) pending.resolve();
      else this.giveUp(pending.runId, [pending], new RunNotStorableError(pending.runId, pending.work.failure.reason));
    }
  }

  /**
   * Tries each entry of a failed batch on its own, in order (a run's later entries wait on its
   * earlier ones), so one bad entry never holds back the others. A run whose entry still fails
   * alone is given up (`giveUpAlone`); the rest commit.
   */
  private async isolate(batch: readonly Pending[], batchError: Error): Promise<void> {
    this.options.log.error({ err: batchError, batchSize: batch.length }, 'commit failed; committing its entries one by one');
    const failed = new Map<string, { error: Error; pendings: Pending[] }>();
    let committed = 0;
    for (const pending of batch) {
      if (this.stopped) {
        pending.reject(this.stopped);
        continue;
      }
      const earlier = failed.get(pending.runId);
      if (earlier) {
        earlier.pendings.push(pending);
        continue;
      }
      const error = await this.attempt([pending]);
      if (error === null) {
        committed += 1;
        this.settleCommitted([pending]);
      } else if (error instanceof FencedError) {
        pending.reject(error);
        this.fence(error);
      } else {
        failed.set(pending.runId, { error, pendings: [pending] });
      }
    }
    for (const [runId, { error, pendings }] of failed) await this.giveUpAlone(runId, pendings, error, committed > 0);
  }

  /**
   * A run's entry failed on its own. It is failed with a reason when the fault is the entry's:
   * a permanent error, or a transient one that persists while other entries commit. When nothing
   * commits the database itself is down: the run is released untouched, to be restored later.
   */
  private async giveUpAlone(runId: string, pendings: Pending[], error: Error, othersCommitted: boolean): Promise<void> {
    const [first] = pendings;
    if (this.stopped || first === undefined) {
      for (const pending of pendings) pending.reject(this.stopped ?? error);
      return;
    }
    if ('failure' in first.work || error instanceof JournalConflictError || (error instanceof TransientStoreError && !othersCommitted)) {
      const restorable = error instanceof TransientStoreError && 'entry' in first.work;
      this.giveUp(runId, pendings, new CommitGaveUpError(runId, error, restorable));
      return;
    }
    const reason = `its state could not be stored: ${error.message}`;
    const record = runFailureOf(first.work.entry, reason, this.options.clock.now());
    const failure = await this.writeFailure(record);
    if (failure instanceof FencedError) this.fence(failure);
    if (this.stopped) for (const pending of pendings) pending.reject(this.stopped);
    else if (failure === null) this.giveUp(runId, pendings, new RunNotStorableError(runId, reason));
    else this.giveUp(runId, pendings, new CommitGaveUpError(runId, failure, false));
  }

  /** Writes one failure record, retrying transient errors within the same bound. */
  private async writeFailure(record: RunFailureRecord): Promise<Error | null> {
    const pending: Pending = { runId: record.runId, work: { failure: record }, resolve: () => undefined, reject: () => undefined };
    for (let attempt = 1; ; attempt++) {
      const error = await this.attempt([pending]);
      if (error === null || !(error instanceof TransientStoreError) || attempt >= this.retry.attempts || this.stopped) return error;
      await new Promise<void>((resolve) => this.options.clock.setTimeout(resolve, this.backoff(attempt)));
    }
  }

  /** Rejects `pendings` and every queued write of the run with `error`, then tells the owner. */
  private giveUp(runId: string, pendings: readonly Pending[], error: GiveUp): void {
    for (const pending of pendings) pending.reject(error);
    this.queue = this.queue.filter((pending) => {
      if (pending.runId !== runId) return true;
      pending.reject(error);
      return false;
    });
    this.options.onGiveUp(runId, error);
  }

  private fence(error: FencedError): void {
    this.flushing = false;
    this.stop(error);
    this.options.onFenced(error);
  }
}
