import type { Logger } from 'pino';
import { coerceError } from '../../lib/errors.ts';
import { OWN_LINE_EFFECTS, UNRECORDED_EFFECTS } from '../../machines/intents.ts';
import type { RuntimeMetrics } from './metrics.ts';
import type { Effect, EffectHandlers } from './ports.ts';
import type { Clock } from '../clock.ts';
import { backoffMs } from '../../lib/backoff.ts';

export interface EffectExecutorOptions {
  /** One handler per kind, each idempotent by `effect.effectId`: effects are at-least-once. */
  handlers: EffectHandlers;
  markDone: (effectIds: string[]) => Promise<void>;
  clock: Clock;
  log: Logger;
  metrics: RuntimeMetrics;
}

const QUICK_ATTEMPTS = 5;
const RETRY_BASE_MS = 100;
const REDRIVE_MAX_MS = 30_000;
const DONE_FLUSH_MS = 50;

/**
 * Executes effects after the transaction that recorded them committed. Effects of one run run in
 * order, in one line; the kinds of `OWN_LINE_EFFECTS` (calls to a forge) run in order in a line of
 * their own per run and kind, so a slow forge never delays a dispatch. A failing effect is retried a few times in that order; after that it leaves the run's line
 * (so the run's later effects are not held up) and is re-driven with a capped backoff for as long as
 * this coordinator runs. Whatever is still undone at a stop stays in the outbox for the next restore.
 */
export class EffectExecutor {
  private readonly chains = new Map<string, Promise<void>>();
  private readonly redriving = new Map<string, { effect: Effect; handle: unknown }>();
  private done: string[] = [];
  private flushHandle: unknown = null;
  private inFlight = 0;
  private stopped = false;

  constructor(private readonly options: EffectExecutorOptions) {}

  execute(effects: Effect[]): void {
    for (const effect of effects) {
      if (this.stopped) return;
      // Restored again while it is being re-driven: the re-drive carries on alone.
      if (this.redriving.has(effect.effectId)) continue;
      this.track(+1);
      const line = OWN_LINE_EFFECTS.has(effect.kind) ? `${effect.runId}#${effect.kind}` : effect.runId;
      const previous = this.chains.get(line) ?? Promise.resolve();
      const next = previous.then(() => this.runInLine(effect));
      this.chains.set(line, next);
      void next.finally(() => {
        if (this.chains.get(line) === next) this.chains.delete(line);
      });
    }
  }

  /** Resolves when every effect handed in so far has run once through its quick retries (tests, shutdown). */
  async idle(): Promise<void> {
    while (this.chains.size > 0) await Promise.all([...this.chains.values()]);
    await this.flushDone();
  }

  /** Effects being re-driven after their quick retries failed. */
  get failingCount(): number {
    return this.redriving.size;
  }

  /** No new effects and no more retries (an effect already in line runs once): what is undone stays in the outbox. */
  stop(): void {
    this.stopped = true;
    for (const { handle } of this.redriving.values()) this.options.clock.clearTimeout(handle);
    this.redriving.clear();
  }

  private async runInLine(effect: Effect): Promise<void> {
    for (let attempt = 1; attempt <= QUICK_ATTEMPTS; attempt++) {
      if (await this.attempt(effect, attempt)) return;
      if (this.stopped) return;
      if (attempt < QUICK_ATTEMPTS) await this.sleep(backoffMs(attempt, { baseMs: RETRY_BASE_MS, maxMs: REDRIVE_MAX_MS }));
    }
    this.redrive(effect, QUICK_ATTEMPTS + 1);
  }

  private redrive(effect: Effect, attempt: number): void {
    const delayMs = backoffMs(attempt, { baseMs: RETRY_BASE_MS, maxMs: REDRIVE_MAX_MS });
    this.logOf(effect).error({ attempt, nextInMs: delayMs }, 'effect still failing; re-driving it apart from the run\'s later effects');
    const handle = this.options.clock.setTimeout(() => {
      void this.attempt(effect, attempt).then((ok) => {
        if (ok || this.stopped) return;
        this.redrive(effect, attempt + 1);
      });
    }, delayMs);
    this.redriving.set(effect.effectId, { effect, handle });
  }

  /** One try; true once the effect is done. */
  private async attempt(effect: Effect, attempt: number): Promise<boolean> {
    try {
      await this.handle(effect);
      this.redriving.delete(effect.effectId);
      this.track(-1);
      if (!UNRECORDED_EFFECTS.has(effect.kind)) this.markDone(effect.effectId);
      return true;
    } catch (thrown) {
      this.logOf(effect).warn({ err: coerceError(thrown), attempt }, 'effect failed');
      return false;
    }
  }

  /** Calls the handler of the effect's own kind (the table is complete by its type). */
  private handle(effect: Effect): Promise<void> | void {
    const handler = this.options.handlers[effect.kind] as (effect: Effect) => Promise<void> | void;
    return handler(effect);
  }

  private logOf(effect: Effect): Logger {
    return this.options.log.child({ runId: effect.runId, effectId: effect.effectId, effect: effect.kind });
  }

  private track(change: number): void {
    this.inFlight += change;
    this.options.metrics.outboxPending.set(this.inFlight);
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
