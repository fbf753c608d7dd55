import type { Logger } from 'pino';
import { RunNotOwnedError } from './errors.ts';
import { coerceError } from '../../lib/errors.ts';
import { throwFirstRejection } from '../../lib/concurrently.ts';
import type { Clock } from '../clock.ts';
import type { IncomingRunEvent, Supervisor } from './supervisor.ts';

/** Where `deliver` left an event: applied here, in its owner's inbox, or `dropped` (the run is not live anywhere, so no one will ever read it). */
export type DeliveryRoute = 'local' | 'inbox' | 'dropped';

/** Where events for runs owned elsewhere wait for their owner (src/db implements it; it wakes the owner). */
export interface InboxStore {
  /** False when the event was not kept: its run is not live (ended, or never existed). */
  enqueue(runId: string, event: IncomingRunEvent): Promise<boolean>;
  peek(limit: number): Promise<{ id: number; runId: string; event: unknown }[]>;
  remove(ids: number[]): Promise<void>;
}

export interface EventRouterOptions {
  supervisor: Supervisor;
  inbox: InboxStore;
  clock: Clock;
  log: Logger;
  /** How often the inbox is read without a wake-up signal (signals can be lost while reconnecting). */
  pollMs: number;
  /** An inbox event whose run is no longer active here (it ended): the last chance to undo its side effects. */
  onUndeliverable?: (runId: string, event: IncomingRunEvent) => void;
  /** False while runs are being adopted: their events wait until their actors exist. */
  canDrain?: () => boolean;
}

const BATCH = 500;

/**
 * Delivers an event to a run wherever its actor lives: straight into the local mailbox when
 * this coordinator owns the run, else into the run's inbox, which its owner drains (FO-3, FO-4).
 * Inbox writes for one run are made one after another, so the owner reads them in call order.
 */
export class EventRouter {
  private timer: unknown = null;
  private draining: Promise<number> | null = null;
  private drainAgain = false;
  private stopped = false;
  private readonly writes = new Map<string, Promise<unknown>>();

  constructor(private readonly options: EventRouterOptions) {}

  async deliver(runId: string, event: IncomingRunEvent): Promise<DeliveryRoute> {
    const { supervisor } = this.options;
    if (supervisor.owns(runId)) {
      try {
        await supervisor.send(runId, event);
        return 'local';
      } catch (thrown) {
        if (!(thrown instanceof RunNotOwnedError)) throw thrown;
      }
    }
    return (await this.enqueueInOrder(runId, event)) ? 'inbox' : 'dropped';
  }

  start(): void {
    this.schedule();
  }

  stop(): void {
    this.stopped = true;
    if (this.timer !== null) this.options.clock.clearTimeout(this.timer);
  }

  /** A peer left events for runs owned here: read them now rather than at the next poll. */
  wake(): void {
    if (this.stopped) return;
    void this.drain().catch((thrown: unknown) => this.options.log.warn({ err: coerceError(thrown) }, 'inbox drain failed; retrying'));
  }

  /** Takes the inbox of every run owned here, oldest first; drops events of runs that ended. */
  async drain(): Promise<number> {
    if (this.draining) {
      this.drainAgain = true;
      return this.draining;
    }
    this.draining = this.drainLoop();
    try {
      return await this.draining;
    } finally {
      this.draining = null;
    }
  }

  private async drainLoop(): Promise<number> {
    let total = 0;
    do {
      if (!this.mayDeliver()) return total;
      this.drainAgain = false;
      const events = await this.options.inbox.peek(BATCH);
      // An adoption began after the last look: a peek that came after it moved the runs here reads
      // their events before their actors exist, and delivering now would drop them. They stay in the
      // inbox for the drain that follows the adoption.
      if (!this.mayDeliver()) return total;
      // Each send applies its event at once, in this order; only the commits are awaited, together,
      // so the batch costs one group commit instead of one commit after another.
      const deliveries = events.map((item) => this.deliverFromInbox(item.runId, item.event as IncomingRunEvent));
      const outcomes = await Promise.allSettled(deliveries);
      const done = events.filter((_, i) => outcomes[i]?.status === 'fulfilled').map((item) => item.id);
      await this.options.inbox.remove(done);
      total += done.length;
      throwFirstRejection(outcomes);
      if (events.length === BATCH) this.drainAgain = true;
    } while (this.drainAgain && !this.stopped);
    return total;
  }

  private mayDeliver(): boolean {
    return this.options.canDrain?.() !== false;
  }

  private async enqueueInOrder(runId: string, event: IncomingRunEvent): Promise<boolean> {
    const previous = this.writes.get(runId) ?? Promise.resolve();
    const write = previous.catch(() => undefined).then(() => this.options.inbox.enqueue(runId, event));
    this.writes.set(runId, write);
    try {
      return await write;
    } finally {
      if (this.writes.get(runId) === write) this.writes.delete(runId);
    }
  }

  private async deliverFromInbox(runId: string, event: IncomingRunEvent): Promise<void> {
    try {
      await this.options.supervisor.send(runId, event);
    } catch (thrown) {
      if (!(thrown instanceof RunNotOwnedError)) throw thrown;
      this.options.log.info({ runId, event: event.type }, 'inbox event for a run that is no longer active; dropped');
      this.options.onUndeliverable?.(runId, event);
    }
  }

  private schedule(): void {
    if (this.stopped) return;
    this.timer = this.options.clock.setTimeout(() => {
      this.drain()
        .catch((thrown: unknown) => this.options.log.warn({ err: coerceError(thrown) }, 'inbox drain failed; retrying'))
        .finally(() => this.schedule());
    }, this.options.pollMs);
  }
}
