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
 * order, through one host timer. Re-arming the same id replaces the earlier due time. Indexed by
 * run, so a run that ends drops its deadlines without a walk over every run's (it was one walk each
 * time a run closed and again when it retired: quadratic in the live runs).
 */
export class TimerService {
  /** Run id → its armed timers, one per deadline id: a list, as a run holds a few (a Map each cost 0.1–0.4 KB of every live run). */
  private readonly armed = new Map<string, ArmedTimer[]>();
  private count = 0;
  private heap: ArmedTimer[] = [];
  private handle: unknown = null;
  private nextWake = Infinity;
  private stopped = false;

  constructor(
    private readonly clock: Clock,
    private readonly deliver: (timer: ArmedTimer) => void,
  ) {}

  get size(): number {
    return this.count;
  }

  arm(timer: ArmedTimer): void {
    const ofRun = this.armed.get(timer.runId);
    const at = ofRun?.findIndex((armed) => armed.deadlineId === timer.deadlineId) ?? -1;
    if (ofRun && at >= 0) ofRun[at] = timer;
    else {
      if (ofRun) ofRun.push(timer);
      else this.armed.set(timer.runId, [timer]);
      this.count += 1;
    }
    push(this.heap, timer);
    if (this.heap.length > 4 * this.count + 64) this.compact();
    this.reschedule();
  }

  disarm(runId: string, deadlineId: string): void {
    const ofRun = this.armed.get(runId);
    const at = ofRun?.findIndex((armed) => armed.deadlineId === deadlineId) ?? -1;
    if (!ofRun || at < 0) return;
    ofRun.splice(at, 1);
    this.count -= 1;
    if (ofRun.length === 0) this.armed.delete(runId);
  }

  disarmRun(runId: string): void {
    const ofRun = this.armed.get(runId);
    if (!ofRun) return;
    this.count -= ofRun.length;
    this.armed.delete(runId);
  }

  stop(): void {
    this.stopped = true;
    if (this.handle !== null) this.clock.clearTimeout(this.handle);
    this.handle = null;
    this.armed.clear();
    this.count = 0;
    this.heap = [];
  }

  /** Renewed deadlines leave stale heap entries behind; rebuild from the live set now and then. */
  private compact(): void {
    this.heap = [];
    for (const ofRun of this.armed.values()) for (const timer of ofRun) push(this.heap, timer);
  }

  private isCurrent(timer: ArmedTimer): boolean {
    return this.armed.get(timer.runId)?.includes(timer) === true;
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
      this.disarm(timer.runId, timer.deadlineId);
      due.push(timer);
    }
    for (const timer of due) this.deliver(timer);
    this.reschedule();
  }
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
