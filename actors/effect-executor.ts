import type { Logger } from 'pino';
import { coerceError } from './errors.ts';
import type { RuntimeMetrics } from './metrics.ts';
import type { Clock, Effect } from './ports.ts';

/** Runs one committed effect. Must be idempotent by `effect.effectId`: effects are at-least-once. */
export type EffectHandler = (effect: Effect) => Promise<void> | void;

export interface EffectExecutorOptions {
  handlers: Record<string, EffectHandler>;
  markDone: (effectIds: string[]) => Promise<void>;
  clock: Clock;
  log: Logger;
  metrics: RuntimeMetrics;
}

const ATTEMPTS = 5;
const RETRY_BASE_MS = 100;
const DONE_FLUSH_MS = 50;

/**
 * Executes effects after the transaction that recorded them committed (G-4). Effects of one
 * run run in order; a failing effect is retried a few times, then left pending in the outbox
 * to be re-run by whoever restores the run next.
 */
export class EffectExecutor {
  private readonly chains = new Map<string, Promise<void>>();
  private done: string[] = [];
  private flushHandle: unknown = null;
  private inFlight = 0;

  constructor(private readonly options: EffectExecutorOptions) {}

  execute(effects: Effect[]): void {
    for (const effect of effects) {
      this.inFlight += 1;
      this.options.metrics.outboxPending.set(this.inFlight);
      const previous = this.chains.get(effect.runId) ?? Promise.resolve();
      const next = previous.then(() => this.runWithRetry(effect));
      this.chains.set(effect.runId, next);
      void next.finally(() => {
        this.inFlight -= 1;
        this.options.metrics.outboxPending.set(this.inFlight);
        if (this.chains.get(effect.runId) === next) this.chains.delete(effect.runId);
      });
    }
  }

  /** Resolves when every effect handed in so far has finished (tests, shutdown). */
  async idle(): Promise<void> {
    while (this.chains.size > 0) await Promise.all([...this.chains.values()]);
    await this.flushDone();
  }

  private async runWithRetry(effect: Effect): Promise<void> {
    const handler = this.options.handlers[effect.kind];
    const log = this.options.log.child({ runId: effect.runId, effectId: effect.effectId, effect: effect.kind });
    if (!handler) {
      log.error('no handler for effect kind; left pending');
      return;
    }
    for (let attempt = 1; attempt <= ATTEMPTS; attempt++) {
      try {
        await handler(effect);
        this.markDone(effect.effectId);
        return;
      } catch (thrown) {
        log.warn({ err: coerceError(thrown), attempt }, 'effect failed');
        if (attempt < ATTEMPTS) await this.sleep(RETRY_BASE_MS * 2 ** (attempt - 1));
      }
    }
    log.error('effect still failing; left pending in the outbox for the next restore');
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => this.options.clock.setTimeout(resolve, ms));
  }

  private markDone(effectId: string): void {
    this.done.push(effectId);
    if (this.flushHandle === null) this.flushHandle = this.options.clock.setTimeout(() => void this.flushDone(), DONE_FLUSH_MS);
  }

  private async flushDone(): Promise<void> {
    if (this.flushHandle !== null) this.options.clock.clearTimeout(this.flushHandle);
    this.flushHandle = null;
    const ids = this.done.splice(0);
    if (ids.length === 0) return;
    try {
      await this.options.markDone(ids);
    } catch (thrown) {
      this.options.log.warn({ err: coerceError(thrown), count: ids.length }, 'marking effects done failed; they may run again');
    }
  }
}
