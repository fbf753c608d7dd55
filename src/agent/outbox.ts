import type { AgentMessage, InFlightJob, JobStatusMessage } from '../ws/messages.ts';

/** The socket as the outbox sees it. `write` resolves false when the frame could not be written. */
export interface Link {
  readonly registered: boolean;
  write(message: AgentMessage): Promise<boolean>;
}

export interface ReplaySummary {
  replayed: number;
  dropped: number;
  storedStatuses: number;
}

/**
 * The agent's send paths (protocol.md §10.1, §14):
 * - buffered (`log.chunk`, `job.heartbeat`, `step.status`): kept in a ring while not registered,
 *   oldest dropped, replayed in order after the next `register.ack`;
 * - direct (everything else): written while registered, dropped otherwise;
 * - terminal `job.status`: stored when it cannot be written, listed in `inFlightJobs` on the next
 *   register and sent after the ring replay.
 */
export class Outbox {
  private ring: AgentMessage[] = [];
  private droppedFromRing = 0;
  private readonly terminals = new Map<string, JobStatusMessage>();

  constructor(
    private readonly link: Link,
    private readonly capacity: number,
  ) {}

  direct(message: AgentMessage): void {
    if (this.link.registered) void this.link.write(message);
  }

  buffered(message: AgentMessage): void {
    if (this.link.registered && this.ring.length === 0) {
      void this.link.write(message);
      return;
    }
    this.ring.push(message);
    if (this.ring.length > this.capacity) {
      this.ring.shift();
      this.droppedFromRing += 1;
    }
  }

  terminal(message: JobStatusMessage): void {
    if (!this.link.registered) {
      this.terminals.set(message.jobId, message);
      return;
    }
    void this.link.write(message).then((written) => {
      if (!written) this.terminals.set(message.jobId, message);
    });
  }

  /** Jobs whose terminal status is still owed to the coordinator. */
  pendingTerminalJobs(): InFlightJob[] {
    return [...this.terminals.values()].map(({ jobId, runId }) => ({ jobId, runId }));
  }

  hasPendingTerminal(jobId: string): boolean {
    return this.terminals.has(jobId);
  }

  get pendingCount(): number {
    return this.ring.length + this.terminals.size;
  }

  /** After `register.ack`: the gap marker, the ring in order, then the stored terminal statuses. */
  replay(gapMarker: (summary: ReplaySummary) => AgentMessage | undefined): ReplaySummary {
    const summary = { replayed: this.ring.length, dropped: this.droppedFromRing, storedStatuses: this.terminals.size };
    const marker = gapMarker(summary);
    if (marker !== undefined) void this.link.write(marker);
    const ring = this.ring;
    this.ring = [];
    this.droppedFromRing = 0;
    for (const message of ring) void this.link.write(message);
    const terminals = [...this.terminals.values()];
    this.terminals.clear();
    for (const status of terminals) this.terminal(status);
    return summary;
  }
}
