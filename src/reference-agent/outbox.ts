import type { AgentMessage, InFlightJob, JobStatusMessage } from '../ws/messages.ts';
import { TokenBucket } from '../ws/rate-limit.ts';

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

interface Backlogged {
  message: AgentMessage;
  /** A terminal `job.status`: stored again if it cannot be written. */
  terminal: boolean;
}

/** A little under the coordinator's per-connection limits (docs/protocol.md#endpoints-and-transport): a replay uses only what live frames leave. */
const BUDGET = { messages: 160, messagesPerSecond: 80, bytes: 1536 * 1024, bytesPerSecond: 400 * 1024 };

/**
 * The agent's send paths (docs/protocol.md#facts-about-the-stock-agent-that-switchyard-lives-with):
 * - buffered (`log.chunk`, `job.heartbeat`, `step.status`): kept in a ring while not registered,
 *   oldest dropped, replayed in order after the next `register.ack`;
 * - direct (everything else): written while registered, dropped otherwise;
 * - terminal `job.status`: stored when it cannot be written, listed in `inFlightJobs` on the next
 *   register and sent after the ring replay.
 * A replay is paced within the coordinator's rate limit, so that a new job's `job.ack` written
 * meanwhile is not queued behind thousands of old frames; a job's later frames follow its replayed ones.
 */
export class Outbox {
  private ring: AgentMessage[] = [];
  private droppedFromRing = 0;
  private readonly terminals = new Map<string, JobStatusMessage>();
  private backlog: Backlogged[] = [];
  private readonly backlogJobs = new Map<string, number>();
  private pumpTimer: NodeJS.Timeout | undefined;
  private readonly messageBudget = new TokenBucket(BUDGET.messages, BUDGET.messagesPerSecond, Date.now());
  private readonly byteBudget = new TokenBucket(BUDGET.bytes, BUDGET.bytesPerSecond, Date.now());

  constructor(
    private readonly link: Link,
    private readonly capacity: number,
    /** Called when the last replayed frame has been written (a draining agent may then exit). */
    private readonly onReplayed: () => void,
  ) {}

  direct(message: AgentMessage): void {
    if (!this.link.registered) return;
    if (this.inBacklog(message)) this.enqueue({ message, terminal: false });
    else void this.send(message);
  }

  buffered(message: AgentMessage): void {
    if (this.link.registered && this.ring.length === 0) {
      if (this.inBacklog(message)) this.enqueue({ message, terminal: false });
      else void this.send(message);
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
    if (this.inBacklog(message)) return this.enqueue({ message, terminal: true });
    void this.send(message).then((written) => {
      if (!written) this.terminals.set(message.jobId, message);
    });
  }

  /** Jobs whose terminal status is still owed to the coordinator. */
  pendingTerminalJobs(): InFlightJob[] {
    const queued = this.backlog.flatMap(({ message, terminal }) => (terminal && message.type === 'job.status' ? [message] : []));
    return [...this.terminals.values(), ...queued].map(({ jobId, runId }) => ({ jobId, runId }));
  }

  hasPendingTerminal(jobId: string): boolean {
    return this.terminals.has(jobId) || this.backlog.some(({ message, terminal }) => terminal && jobIdOf(message) === jobId);
  }

  get pendingCount(): number {
    return this.ring.length + this.terminals.size + this.backlog.length;
  }

  /** After `register.ack`: the gap marker, the ring in order, then the stored terminal statuses. */
  replay(gapMarker: (summary: ReplaySummary) => AgentMessage | undefined): ReplaySummary {
    const summary = { replayed: this.ring.length, dropped: this.droppedFromRing, storedStatuses: this.terminals.size };
    const marker = gapMarker(summary);
    if (marker !== undefined) void this.send(marker);
    const ring = this.ring.map((message) => ({ message, terminal: false }));
    const terminals = [...this.terminals.values()].map((message) => ({ message, terminal: true }));
    this.ring = [];
    this.droppedFromRing = 0;
    this.terminals.clear();
    for (const item of [...ring, ...terminals]) this.enqueue(item);
    return summary;
  }

  /** The connection is gone: what was not replayed yet waits for the next one, as if never replayed. */
  disconnected(): void {
    clearTimeout(this.pumpTimer);
    this.pumpTimer = undefined;
    const left = this.backlog;
    this.backlog = [];
    this.backlogJobs.clear();
    for (const { message, terminal } of left) {
      if (terminal && message.type === 'job.status') this.terminals.set(message.jobId, message);
      else this.ring.push(message);
    }
    const over = Math.max(0, this.ring.length - this.capacity);
    this.ring.splice(0, over);
    this.droppedFromRing += over;
  }

  private inBacklog(message: AgentMessage): boolean {
    const jobId = jobIdOf(message);
    return jobId !== undefined && this.backlogJobs.has(jobId);
  }

  private enqueue(item: Backlogged): void {
    this.backlog.push(item);
    const jobId = jobIdOf(item.message);
    if (jobId !== undefined) this.backlogJobs.set(jobId, (this.backlogJobs.get(jobId) ?? 0) + 1);
    this.pump();
  }

  /** Writes backlogged frames while the budget allows, and comes back when it has refilled. */
  private pump(): void {
    if (this.pumpTimer !== undefined || !this.link.registered) return;
    for (let item = this.backlog[0]; item !== undefined; item = this.backlog[0]) {
      const waitMs = this.waitFor(item.message);
      if (waitMs > 0) {
        this.pumpTimer = setTimeout(() => {
          this.pumpTimer = undefined;
          this.pump();
        }, waitMs);
        return;
      }
      this.backlog.shift();
      this.dequeued(item.message);
      void this.send(item.message).then((written) => {
        if (!written && item.terminal && item.message.type === 'job.status') this.terminals.set(item.message.jobId, item.message);
      });
    }
    this.onReplayed();
  }

  private dequeued(message: AgentMessage): void {
    const jobId = jobIdOf(message);
    if (jobId === undefined) return;
    const left = (this.backlogJobs.get(jobId) ?? 1) - 1;
    if (left > 0) this.backlogJobs.set(jobId, left);
    else this.backlogJobs.delete(jobId);
  }

  private waitFor(message: AgentMessage): number {
    const now = Date.now();
    return Math.max(this.messageBudget.msUntil(1, now), this.byteBudget.msUntil(frameBytes(message), now));
  }

  /** Every frame written draws on the budget, so a replay sees what live frames have used. */
  private send(message: AgentMessage): Promise<boolean> {
    const now = Date.now();
    this.messageBudget.charge(1, now);
    this.byteBudget.charge(frameBytes(message), now);
    return this.link.write(message);
  }
}

function jobIdOf(message: AgentMessage): string | undefined {
  return 'jobId' in message && typeof message.jobId === 'string' ? message.jobId : undefined;
}

/** Roughly the frame's size on the wire; only the budget uses it. */
function frameBytes(message: AgentMessage): number {
  return message.type === 'log.chunk' ? 256 + message.lines.reduce((sum, line) => sum + line.length, 0) : 256;
}
