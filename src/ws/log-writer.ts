import type { Logger } from 'pino';
import { coerceError } from '../../lib/errors.ts';
import type { LogChunkInput } from '../db/job-logs.ts';
import { utf8Bytes } from '../db/job-logs.ts';
import { isTransientDatabaseError } from '../db/errors.ts';
import { backoffMs } from '../../lib/backoff.ts';

/** Stores chunks in one write, in the order given. */
export type AppendLogs = (chunks: readonly LogChunkInput[]) => Promise<unknown>;

interface Queued {
  seq: number;
  chunk: LogChunkInput;
  bytes: number;
}

/** Rows per INSERT (7 parameters each, far below Postgres's 65,535). */
const MAX_BATCH = 500;
const ATTEMPTS = 4;
const RETRY_BASE_MS = 100;
/** While the database is unreachable, a batch is tried again this often at most, and never dropped. */
const OUTAGE_RETRY_MAX_MS = 2_000;

/**
 * The `log.chunk` writes of one connection: queued without waiting, written in arrival order, one
 * batch at a time (everything that arrived while the previous batch was being written). A batch the
 * database refuses is retried with backoff, then split so that one bad chunk costs only itself. A
 * batch cut off because the database is unreachable (a restart, a failover) is never dropped: it is
 * tried again until the database answers, and meanwhile the backlog grows until the connection's
 * flow control stops reading the agent's socket (`below`), so the agent slows instead of losing lines.
 */
export class LogWriter {
  private queue: Queued[] = [];
  private seq = 0;
  private written = 0;
  private backlog = 0;
  private running = false;
  private readonly lastSeqOf = new Map<string, number>();
  private waiters: { seq: number; resolve: () => void }[] = [];
  private drainWaiters: { bytes: number; resolve: () => void }[] = [];

  constructor(
    private readonly append: AppendLogs,
    private readonly log: Logger,
    /** The first wait between two tries; the ones after double (tests make it short). */
    private readonly retryBaseMs = RETRY_BASE_MS,
  ) {}

  /** Bytes queued or being written. */
  get backlogBytes(): number {
    return this.backlog;
  }

  add(chunk: LogChunkInput): void {
    this.seq += 1;
    const bytes = utf8Bytes(chunk.lines);
    this.queue.push({ seq: this.seq, chunk, bytes });
    this.backlog += bytes;
    this.lastSeqOf.set(chunk.dispatchId, this.seq);
    if (!this.running) void this.drain();
  }

  /** Whether chunks of this attempt are queued or being written. */
  pending(dispatchId: string): boolean {
    return (this.lastSeqOf.get(dispatchId) ?? 0) > this.written;
  }

  /** Resolves once every chunk of this attempt added so far is written (or given up on); never rejects. */
  flushed(dispatchId: string): Promise<void> {
    const seq = this.lastSeqOf.get(dispatchId) ?? 0;
    if (seq <= this.written) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push({ seq, resolve }));
  }

  /** Resolves once the backlog is at most `bytes`. */
  below(bytes: number): Promise<void> {
    if (this.backlog <= bytes) return Promise.resolve();
    return new Promise((resolve) => this.drainWaiters.push({ bytes, resolve }));
  }

  private async drain(): Promise<void> {
    this.running = true;
    try {
      while (this.queue.length > 0) {
        const batch = this.queue.splice(0, MAX_BATCH);
        await this.write(batch);
        this.settled(batch);
      }
    } finally {
      this.running = false;
    }
  }

  private settled(batch: Queued[]): void {
    this.written = batch.at(-1)?.seq ?? this.written;
    this.backlog -= batch.reduce((sum, item) => sum + item.bytes, 0);
    for (const item of batch) if (this.lastSeqOf.get(item.chunk.dispatchId) === item.seq) this.lastSeqOf.delete(item.chunk.dispatchId);
    const ready = this.waiters.filter((w) => w.seq <= this.written);
    this.waiters = this.waiters.filter((w) => w.seq > this.written);
    const drained = this.drainWaiters.filter((w) => this.backlog <= w.bytes);
    this.drainWaiters = this.drainWaiters.filter((w) => this.backlog > w.bytes);
    for (const waiter of [...ready, ...drained]) waiter.resolve();
  }

  private async write(batch: Queued[]): Promise<void> {
    if (await this.attempt(batch)) return;
    const first = batch[0];
    if (batch.length === 1 && first) {
      const { runId, jobKey, dispatchId, stepIndex } = first.chunk;
      this.log.error({ runId, jobKey, dispatchId, stepIndex, lines: first.chunk.lines.length }, 'log chunk could not be stored; dropped');
      return;
    }
    for (const item of batch) await this.write([item]);
  }

  private async attempt(batch: Queued[]): Promise<boolean> {
    let outageSince: number | null = null;
    for (let attempt = 1, refused = 0; refused < ATTEMPTS; attempt++) {
      try {
        await this.append(batch.map((item) => item.chunk));
        if (outageSince !== null) this.log.info({ chunks: batch.length, waitedMs: Date.now() - outageSince }, 'log chunks stored once the database answered again');
        return true;
      } catch (thrown) {
        if (isTransientDatabaseError(thrown)) {
          if (outageSince === null) this.log.warn({ err: coerceError(thrown), chunks: batch.length }, 'the database is unreachable: log chunks wait until it answers');
          outageSince ??= Date.now();
          await sleep(backoffMs(attempt + 1, { baseMs: this.retryBaseMs, maxMs: Math.min(OUTAGE_RETRY_MAX_MS, this.retryBaseMs * 32) }));
          continue;
        }
        refused += 1;
        this.log.warn({ err: coerceError(thrown), attempt: refused, chunks: batch.length }, 'storing log chunks failed');
        if (refused < ATTEMPTS) await sleep(backoffMs(refused, { baseMs: this.retryBaseMs, maxMs: Infinity }));
      }
    }
    return false;
  }
}

/** Unref'd: a writer waiting for a database that never comes back does not keep a stopping process alive. */
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms).unref());
