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

  take(cost: number, now: number): boolean {
    this.tokens = Math.min(this.burst, this.tokens + ((now - this.last) / 1000) * this.perSecond);
    this.last = now;
    if (this.tokens < cost) return false;
    this.tokens -= cost;
    return true;
  }
}

/** Per-connection limits of protocol.md §1: a short burst is warned about, a long one closes. */
export class ConnectionLimits {
  private readonly messages: TokenBucket;
  private readonly bytes: TokenBucket;
  private violatingSince: number | null = null;

  static readonly SINGLE_MESSAGE_MAX = 4 * 1024 * 1024;
  static readonly SUSTAINED_MS = 5_000;

  constructor(now: number) {
    this.messages = new TokenBucket(200, 100, now);
    this.bytes = new TokenBucket(2 * 1024 * 1024, 500 * 1024, now);
  }

  /** `ok`, `drop` (warn the agent), or `close` (violation lasted over 5 s, or one huge frame). */
  check(size: number, now: number, exempt: boolean): 'ok' | 'drop' | 'close' {
    if (size > ConnectionLimits.SINGLE_MESSAGE_MAX) return 'close';
    if (exempt) return 'ok';
    const allowed = this.messages.take(1, now) && this.bytes.take(size, now);
    if (allowed) {
      this.violatingSince = null;
      return 'ok';
    }
    this.violatingSince ??= now;
    return now - this.violatingSince > ConnectionLimits.SUSTAINED_MS ? 'close' : 'drop';
  }
}

/** Sliding count of ownership violations: five within 60 s close the socket 4003 (§12). */
export class ViolationWindow {
  private readonly times: number[] = [];

  record(now: number): boolean {
    this.times.push(now);
    while (this.times.length > 0 && (this.times[0] ?? 0) < now - 60_000) this.times.shift();
    return this.times.length >= 5;
  }
}
