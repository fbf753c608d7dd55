import { randomInt } from 'node:crypto';
import pg from 'pg';
import type { Logger } from 'pino';
import { ownConnectionRetryMs } from './reconnect.ts';

/** The first key of every liveness lock (`pg_advisory_lock(int4, int4)`): "SYLV", apart from other advisory locks. */
export const LIVENESS_LOCK_CLASS = 0x53594c56;

/** Keys tried at start: each is random, so one taken twice in a row means something else is wrong. */
const KEY_TRIES = 8;

/**
 * A session advisory lock held for as long as this process runs, on a connection of its own (a
 * pooled one would be handed back). When the process dies, the kernel closes the connection and
 * Postgres frees the lock: a peer that finds it free, with this coordinator's renewals overdue,
 * adopts its runs without waiting for the lease to run out (docs/architecture.md#the-liveness-lock).
 *
 * A connection that fails while the process lives is opened again and the same key taken again.
 * Meanwhile the lock is free, but the lease is still renewed on time, so no peer takes it for dead.
 */
export class LivenessLock {
  private client: pg.Client | null = null;
  private closed = false;
  private failures = 0;
  private timer: NodeJS.Timeout | undefined;

  private constructor(
    private readonly connection: pg.ClientConfig,
    private readonly log: Logger,
    /** The lock's second key, written beside the lease (`coordinators.liveness_key`). */
    readonly key: number,
  ) {}

  static async take(connection: pg.ClientConfig, log: Logger): Promise<LivenessLock> {
    for (let tries = 0; tries < KEY_TRIES; tries++) {
      const lock = new LivenessLock(connection, log, randomInt(1, 2 ** 31 - 1));
      if (await lock.open()) return lock;
    }
    throw new Error(`no free liveness lock key in ${KEY_TRIES} random tries`);
  }

  /** Ends the connection, which frees the lock. */
  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.timer);
    await this.client?.end().catch(() => undefined);
    this.client = null;
  }

  /** Takes the key on a new connection; false if another session holds it. */
  private async open(): Promise<boolean> {
    const next = new pg.Client(this.connection);
    next.on('error', (error) => {
      void next.end().catch(() => undefined);
      if (this.client !== next || this.closed) return;
      this.log.warn({ error: error.message, key: this.key }, 'liveness lock connection failed; taking the lock again on a new one');
      this.client = null;
      this.retake();
    });
    try {
      await next.connect();
      const { rows } = await next.query<{ held: boolean }>('SELECT pg_try_advisory_lock($1, $2) AS held', [LIVENESS_LOCK_CLASS, this.key]);
      if (rows[0]?.held === true && !this.closed) {
        this.client = next;
        return true;
      }
    } catch (error) {
      await next.end().catch(() => undefined);
      throw error;
    }
    await next.end().catch(() => undefined);
    return false;
  }

  private retake(): void {
    const delay = ownConnectionRetryMs(this.failures);
    this.failures += 1;
    this.timer = setTimeout(() => {
      if (this.closed) return;
      this.open().then(
        (held) => {
          if (!held) return this.retake();
          this.failures = 0;
          this.log.info({ key: this.key }, 'liveness lock taken again');
        },
        (error: unknown) => {
          this.log.warn({ error: error instanceof Error ? error.message : String(error), key: this.key }, 'liveness lock: cannot connect; retrying');
          this.retake();
        },
      );
    }, delay);
  }
}
