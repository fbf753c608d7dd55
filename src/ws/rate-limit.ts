import { INFORMATIONAL_AGENT_TYPES } from './messages.ts';

/** A token bucket: `burst` tokens, refilled at `perSecond`; time comes from the caller. */
export class TokenBucket {
  private tokens: number;
  private last: number;

  constructor(
    private readonly burst: number,
    private readonly perSecond: number,
    now: number,
  ) {
    this.tokens = burst;
    this.last = now;
  }

  /** Whether `cost` tokens are there now (a cost over the burst never is). */
  has(cost: number, now: number): boolean {
    this.refill(now);
    return this.tokens >= cost;
  }

  take(cost: number, now: number): boolean {
    if (!this.has(cost, now)) return false;
    this.tokens -= cost;
    return true;
  }

  /** Takes `cost` even into debt; returns the ms until the bucket is out of debt (0 when it is not in debt). */
  charge(cost: number, now: number): number {
    this.refill(now);
    this.tokens -= cost;
    return this.tokens >= 0 ? 0 : Math.ceil((-this.tokens / this.perSecond) * 1000);
  }

  /** ms until `cost` tokens (at most the burst) are there. */
  msUntil(cost: number, now: number): number {
    this.refill(now);
    const missing = Math.min(cost, this.burst) - this.tokens;
    return missing <= 0 ? 0 : Math.ceil((missing / this.perSecond) * 1000);
  }

  private refill(now: number): void {
    this.tokens = Math.min(this.burst, this.tokens + (Math.max(0, now - this.last) / 1000) * this.perSecond);
    this.last = now;
  }
}

/**
 * How the rate limit treats a frame: `exempt` (heartbeat), `kept` (settles a job, answers a request
 * or is part of the handshake: never dropped, the socket is paused instead), `droppable` (informational).
 */
export type FrameClass = 'exempt' | 'kept' | 'droppable';

export function frameClassOf(type: string | undefined, known: boolean): FrameClass {
  if (type === 'heartbeat') return 'exempt';
  if (!known || type === undefined || INFORMATIONAL_AGENT_TYPES.has(type)) return 'droppable';
  return 'kept';
}

export type RateVerdict =
  | { kind: 'ok' }
  /** Accepted; stop reading the socket for `ms` so the agent is slowed, not robbed. */
  | { kind: 'pause'; ms: number }
  | { kind: 'drop'; retryAfterMs: number }
  | { kind: 'close' };

/**
 * Per-connection limits of docs/protocol.md#endpoints-and-transport. Every frame but a heartbeat draws on the shared buckets;
 * a kept frame may overdraw them (backpressure), a droppable one is dropped when they are short.
 * Only droppable frames that alone exceed the limit for over 5 s close the socket.
 */
export class ConnectionLimits {
  private readonly messages: TokenBucket;
  private readonly bytes: TokenBucket;
  /** What droppable frames alone have used: a sustained violation is theirs, never a kept frame's. */
  private readonly droppableMessages: TokenBucket;
  private readonly droppableBytes: TokenBucket;
  private violatingSince: number | null = null;

  static readonly SINGLE_MESSAGE_MAX = 4 * 1024 * 1024;
  static readonly SUSTAINED_MS = 5_000;

  constructor(now: number) {
    [this.messages, this.droppableMessages] = [new TokenBucket(200, 100, now), new TokenBucket(200, 100, now)];
    [this.bytes, this.droppableBytes] = [new TokenBucket(2 * 1024 * 1024, 500 * 1024, now), new TokenBucket(2 * 1024 * 1024, 500 * 1024, now)];
  }

  check(frame: FrameClass, size: number, now: number): RateVerdict {
    if (size > ConnectionLimits.SINGLE_MESSAGE_MAX) return { kind: 'close' };
    if (frame === 'exempt') return { kind: 'ok' };
    if (frame === 'kept') {
      const ms = Math.max(this.messages.charge(1, now), this.bytes.charge(size, now));
      return ms > 0 ? { kind: 'pause', ms } : { kind: 'ok' };
    }
    const withinOwnShare = this.droppableMessages.take(1, now) && this.droppableBytes.take(size, now);
    if (withinOwnShare) this.violatingSince = null;
    else this.violatingSince ??= now;
    if (this.violatingSince !== null && now - this.violatingSince > ConnectionLimits.SUSTAINED_MS) return { kind: 'close' };
    if (this.messages.has(1, now) && this.bytes.has(size, now)) {
      this.messages.take(1, now);
      this.bytes.take(size, now);
      return { kind: 'ok' };
    }
    return { kind: 'drop', retryAfterMs: Math.max(1, this.messages.msUntil(1, now), this.bytes.msUntil(size, now)) };
  }
}

/** Sliding count of ownership violations: five within 60 s close the socket 4003 (docs/protocol.md#ownership-rule). */
export class ViolationWindow {
  private readonly times: number[] = [];

  record(now: number): boolean {
    this.times.push(now);
    while (this.times.length > 0 && (this.times[0] ?? 0) < now - 60_000) this.times.shift();
    return this.times.length >= 5;
  }
}
