import type { Clock } from '../../actors/clock.ts';

/** A clock that moves only when told: timers fire in due order inside `advance`. */
export class ManualClock implements Clock {
  private current = 0;
  private nextId = 0;
  private readonly pending = new Map<number, { at: number; fn: () => void }>();

  now(): number {
    return this.current;
  }

  setTimeout(fn: () => void, ms: number): unknown {
    const id = this.nextId++;
    this.pending.set(id, { at: this.current + Math.max(0, ms), fn });
    return id;
  }

  clearTimeout(handle: unknown): void {
    this.pending.delete(handle as number);
  }

  get timers(): number {
    return this.pending.size;
  }

  /** Moves time forward by `ms`, firing each timer that falls due and letting its promises settle. */
  async advance(ms: number): Promise<void> {
    const until = this.current + ms;
    for (;;) {
      await settle();
      const due = [...this.pending.entries()].filter(([, timer]) => timer.at <= until).sort((a, b) => a[1].at - b[1].at)[0];
      if (!due) break;
      this.pending.delete(due[0]);
      this.current = Math.max(this.current, due[1].at);
      due[1].fn();
    }
    this.current = until;
    await settle();
  }
}

async function settle(): Promise<void> {
  for (let i = 0; i < 20; i++) await Promise.resolve();
}
