import type { Logger } from 'pino';
import type { Clock, CommitEntry } from './ports.ts';
import { FencedError, coerceError } from './errors.ts';

export interface CommitObserver {
  onBatch(size: number, seconds: number): void;
}

interface Pending {
  entry: CommitEntry;
  resolve: () => void;
  reject: (error: Error) => void;
}

export interface GroupCommitOptions {
  commit: (entries: CommitEntry[]) => Promise<void>;
  /** Largest number of entries in one transaction. */
  maxBatch: number;
  /** Off: one transaction per entry (the comparison mode of the benchmark). */
  batching: boolean;
  clock: Clock;
  log: Logger;
  observer?: CommitObserver;
  onFenced: (error: FencedError) => void;
}

const RETRY_BASE_MS = 50;
const RETRY_MAX_MS = 5_000;

/**
 * Group commit: entries submitted while a transaction is in flight go together in the next
 * one, so throughput grows with batch size instead of with fsync count. Order is kept; a
 * failed transaction is retried as a whole; a fenced one rejects everything from then on.
 */
export class GroupCommitter {
  private queue: Pending[] = [];
  private flushing = false;
  private fenced: FencedError | null = null;
  private stopped: Error | null = null;
  private retryDelay = RETRY_BASE_MS;

  constructor(private readonly options: GroupCommitOptions) {}

  submit(entry: CommitEntry): Promise<void> {
    if (this.stopped) return Promise.reject(this.stopped);
    return new Promise((resolve, reject) => {
      this.queue.push({ entry, resolve, reject });
      if (!this.flushing) this.scheduleFlush(0);
    });
  }

  /** Stops committing: everything queued is rejected with `reason`, and so is every later submit. */
  stop(reason: Error): void {
    this.fenced ??= reason instanceof FencedError ? reason : null;
    this.stopped ??= reason;
    for (const pending of this.queue.splice(0)) pending.reject(reason);
  }

  get pending(): number {
    return this.queue.length;
  }

  private scheduleFlush(delayMs: number): void {
    this.flushing = true;
    if (delayMs === 0) setImmediate(() => void this.flush());
    else this.options.clock.setTimeout(() => void this.flush(), delayMs);
  }

  private async flush(): Promise<void> {
    if (this.stopped) {
      this.flushing = false;
      return;
    }
    const size = this.options.batching ? this.options.maxBatch : 1;
    const batch = this.queue.slice(0, size);
    if (batch.length === 0) {
      this.flushing = false;
      return;
    }
    const started = performance.now();
    try {
      await this.options.commit(batch.map((p) => p.entry));
    } catch (thrown) {
      this.handleFailure(batch, coerceError(thrown));
      return;
    }
    this.options.observer?.onBatch(batch.length, (performance.now() - started) / 1000);
    this.queue.splice(0, batch.length);
    this.retryDelay = RETRY_BASE_MS;
    for (const pending of batch) pending.resolve();
    if (this.queue.length > 0) this.scheduleFlush(0);
    else this.flushing = false;
  }

  private handleFailure(batch: Pending[], error: Error): void {
    if (error instanceof FencedError) {
      this.flushing = false;
      this.stop(error);
      this.options.onFenced(error);
      return;
    }
    if (this.stopped) {
      this.flushing = false;
      return;
    }
    this.options.log.error({ err: error, batchSize: batch.length, retryInMs: this.retryDelay }, 'commit failed; retrying');
    const delay = this.retryDelay;
    this.retryDelay = Math.min(this.retryDelay * 2, RETRY_MAX_MS);
    this.scheduleFlush(delay);
  }
}
