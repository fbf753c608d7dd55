import type { Logger } from 'pino';
import { RunNotOwnedError, coerceError } from './errors.ts';
import type { Clock } from './ports.ts';
import type { IncomingRunEvent, Supervisor } from './supervisor.ts';

/** Where events for runs owned elsewhere wait for their owner (src/db implements it). */
export interface InboxStore {
  enqueue(runId: string, event: IncomingRunEvent): Promise<void>;
  peek(limit: number): Promise<{ id: number; runId: string; event: unknown }[]>;
  remove(ids: number[]): Promise<void>;
}

const POLL_MS = 200;
const BATCH = 500;

/**
 * Delivers an event to a run wherever its actor lives: straight into the local mailbox when
 * this coordinator owns the run, else into the run's inbox, which its owner drains (FO-3, FO-4).
 */
export class EventRouter {
  private timer: unknown = null;
  private draining = false;
  private stopped = false;

  constructor(
    private readonly supervisor: Supervisor,
    private readonly inbox: InboxStore,
    private readonly clock: Clock,
    private readonly log: Logger,
  ) {}

  async deliver(runId: string, event: IncomingRunEvent): Promise<'local' | 'inbox'> {
    if (this.supervisor.owns(runId)) {
      try {
        await this.supervisor.send(runId, event);
        return 'local';
      } catch (thrown) {
        if (!(thrown instanceof RunNotOwnedError)) throw thrown;
      }
    }
    await this.inbox.enqueue(runId, event);
    return 'inbox';
  }

  start(): void {
    this.schedule();
  }

  stop(): void {
    this.stopped = true;
    if (this.timer !== null) this.clock.clearTimeout(this.timer);
  }

  /** Takes the inbox of every run owned here, oldest first; drops events of runs that ended. */
  async drain(): Promise<number> {
    if (this.draining) return 0;
    this.draining = true;
    try {
      const events = await this.inbox.peek(BATCH);
      const done: number[] = [];
      for (const item of events) {
        await this.deliverFromInbox(item.runId, item.event as IncomingRunEvent);
        done.push(item.id);
      }
      await this.inbox.remove(done);
      return done.length;
    } finally {
      this.draining = false;
    }
  }

  private async deliverFromInbox(runId: string, event: IncomingRunEvent): Promise<void> {
    try {
      await this.supervisor.send(runId, event);
    } catch (thrown) {
      if (!(thrown instanceof RunNotOwnedError)) throw thrown;
      this.log.info({ runId, event: event.type }, 'inbox event for a run that is no longer active; dropped');
    }
  }

  private schedule(): void {
    if (this.stopped) return;
    this.timer = this.clock.setTimeout(() => {
      this.drain()
        .catch((thrown: unknown) => this.log.warn({ err: coerceError(thrown) }, 'inbox drain failed; retrying'))
        .finally(() => this.schedule());
    }, POLL_MS);
  }
}
