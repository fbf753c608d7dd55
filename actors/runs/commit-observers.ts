import type { Logger } from 'pino';
import { coerceError } from '../../lib/errors.ts';
import type { CommitEntry } from './ports.ts';

/** What observers (the visualizer's live stream) see after each committed event. */
export interface CommittedUpdate {
  runId: string;
  seq: number;
  event: unknown;
  receivedAt: number;
  stateAfter: unknown;
  status: string;
}

/** The listeners told of every committed event, one update per event; a failing listener is logged, never fatal. */
export class CommitObservers {
  private readonly listeners = new Set<(update: CommittedUpdate) => void>();

  constructor(private readonly log: Logger) {}

  add(listener: (update: CommittedUpdate) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  notify(entry: Pick<CommitEntry, 'runId' | 'events'> & { run: { status: string } }): void {
    if (this.listeners.size === 0) return;
    for (const event of entry.events) {
      const update = { runId: entry.runId, seq: event.seq, event: event.event, receivedAt: event.receivedAt, stateAfter: event.stateAfter, status: entry.run.status };
      for (const listener of this.listeners) {
        try {
          listener(update);
        } catch (thrown) {
          this.log.warn({ err: coerceError(thrown) }, 'observer failed');
        }
      }
    }
  }
}
