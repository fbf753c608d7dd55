import type { DeadlineKind } from '../../machines/types.ts';
import type { Clock } from '../clock.ts';

export interface ArmedTimer {
  runId: string;
  deadlineId: string;
  kind: DeadlineKind;
  jobKey: string | null;
  dueAt: number;
}

/** setTimeout cannot wait longer than this; a later deadline is re-checked when it passes. */
const MAX_WAIT_MS = 2 ** 31 - 1;

/**
 * In-memory index of the durable deadlines of the runs this coordinator owns. The rows live
 * in Postgres (written with the snapshot); this only decides when to deliver them, in `dueAt`
 * order, through one host timer. Re-arming the same id replaces the earlier due time.
 */
export class TimerService {
  private readonly armed = new Map<string, ArmedTimer>();
  private heap: ArmedTimer[] = [];
  private handle: unknown = null;
  private nextWake = Infinity;
  private stopped = false;

  constructor(
    private readonly clock: Clock,
    private readonly deliver: (timer: ArmedTimer) => void,
  ) {}

  get size(): number {
    return this.armed.size;
  }

  arm(timer: ArmedTimer): void {
    this.armed.set(keyOf(timer.runId, timer.deadlineId), timer);
    push(this.heap, timer);
    if (this.heap.length > 4 * this.armed.size + 64) this.compact();
    this.reschedule();
  }

  disarm(runId: string, deadlineId: string): void {
    this.armed.delete(keyOf(runId, deadlineId));
  }

  disarmRun(runId: string): void {
    for (const [key, timer] of this.armed) if (timer.runId === runId) this.armed.delete(key);
  }

  stop(): void {
    this.stopped = true;
    if (this.handle !== null) this.clock.clearTimeout(this.handle);
    this.handle = null;
    this.armed.clear();
    this.heap = [];
  }

  /** Renewed deadlines leave stale heap entries behind; rebuild from the live set now and then. */
  private compact(): void {
    this.heap = [];
    for (const timer of this.armed.values()) push(this.heap, timer);
  }

  private isCurrent(timer: ArmedTimer): boolean {
    return this.armed.get(keyOf(timer.runId, timer.deadlineId)) === timer;
  }

  private reschedule(): void {
    while (this.heap.length > 0 && !this.isCurrent(this.heap[0] as ArmedTimer)) pop(this.heap);
    const next = this.heap[0];
    if (!next || this.stopped) return;
    if (next.dueAt >= this.nextWake && this.handle !== null) return;
    if (this.handle !== null) this.clock.clearTimeout(this.handle);
    this.nextWake = next.dueAt;
    const wait = Math.min(Math.max(0, next.dueAt - this.clock.now()), MAX_WAIT_MS);
    this.handle = this.clock.setTimeout(() => this.fireDue(), wait);
  }

  private fireDue(): void {
    this.handle = null;
    this.nextWake = Infinity;
    const now = this.clock.now();
    const due: ArmedTimer[] = [];
    while (this.heap.length > 0 && (this.heap[0] as ArmedTimer).dueAt <= now) {
      const timer = pop(this.heap) as ArmedTimer;
      if (!this.isCurrent(timer)) continue;
      this.armed.delete(keyOf(timer.runId, timer.deadlineId));
      due.push(timer);
    }
    for (const timer of due) this.deliver(timer);
    this.reschedule();
  }
}

function keyOf(runId: string, deadlineId: string): string {
  return `${runId}\u0000${deadlineId}`;
}

function before(a: ArmedTimer, b: ArmedTimer): boolean {
  return a.dueAt < b.dueAt;
}

function push(heap: ArmedTimer[], timer: ArmedTimer): void {
  heap.push(timer);
  let i = heap.length - 1;
  while (i > 0) {
    const parent = (i - 1) >> 1;
    if (!before(heap[i] as ArmedTimer, heap[parent] as ArmedTimer)) break;
    [heap[i], heap[parent]] = [heap[parent] as ArmedTimer, heap[i] as ArmedTimer];
    i = parent;
  }
}

function pop(heap: ArmedTimer[]): ArmedTimer | undefined {
  const top = heap[0];
  const last = heap.pop();
  if (heap.length === 0 || last === undefined) return top;
  heap[0] = last;
  let i = 0;
  for (;;) {
    const left = 2 * i + 1;
    const right = left + 1;
    let smallest = i;
    if (left < heap.length && before(heap[left] as ArmedTimer, heap[smallest] as ArmedTimer)) smallest = left;
    if (right < heap.length && before(heap[right] as ArmedTimer, heap[smallest] as ArmedTimer)) smallest = right;
    if (smallest === i) return top;
    [heap[i], heap[smallest]] = [heap[smallest] as ArmedTimer, heap[i] as ArmedTimer];
    i = smallest;
  }
}
