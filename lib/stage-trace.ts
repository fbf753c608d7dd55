/**
 * Where one delivery's time goes on its way to its first `job.dispatch`: named marks taken on the
 * real path (the webhook route, the pipeline, the supervisor, the dispatch send), each the end of
 * one stage. A stage's time is its mark minus the mark before it, so the stages of one delivery add
 * up to its whole way, and the budget a benchmark prints is read from these, not from a profiler.
 */

/** The marks of one delivery, in the order they were taken. */
export class StageTrace {
  readonly startedAt: number;
  readonly marks: { stage: string; at: number }[] = [];
  /** The run whose first dispatch ends it: a delivery's first run (`DispatchPathTraces.bind`). */
  boundTo: string | null = null;

  /** Starts now; `now` is the clock in milliseconds (a test's own). */
  constructor(private readonly now: () => number = () => performance.now()) {
    this.startedAt = now();
  }

  /** The stage named `stage` ends now. */
  mark(stage: string): void {
    this.marks.push({ stage, at: this.now() });
  }

  /** Each stage's time in seconds, in order; a stage marked twice counts both times. */
  stages(): { stage: string; seconds: number }[] {
    let previous = this.startedAt;
    return this.marks.map(({ stage, at }) => {
      const seconds = (at - previous) / 1000;
      previous = at;
      return { stage, seconds };
    });
  }
}

/** Traces bound to a run at most, oldest dropped first: a run whose job never goes out does not hold its trace for ever. */
const MAX_OPEN_TRACES = 1_000;

/**
 * The traces of runs created from a traced delivery, until their first dispatch is sent. Parts of
 * the path that know only the run id mark it here; a run without a trace costs one map lookup.
 */
export class DispatchPathTraces {
  private readonly open = new Map<string, StageTrace>();

  /** `observe` receives each stage of a finished trace, then `total` for its whole way. */
  constructor(private readonly observe: (stage: string, seconds: number) => void) {}

  /**
   * Marks of `runId` go to `trace` from now on. A trace already bound (a delivery's second run) is
   * left as it is, and so is a run already traced (a duplicate delivery of the run being created).
   */
  bind(runId: string, trace: StageTrace): void {
    if (trace.boundTo !== null || this.open.has(runId)) return;
    trace.boundTo = runId;
    if (this.open.size >= MAX_OPEN_TRACES) this.open.delete(this.open.keys().next().value as string);
    this.open.set(runId, trace);
  }

  mark(runId: string, stage: string): void {
    this.open.get(runId)?.mark(stage);
  }

  /** The run's first dispatch went out with `stage`: its trace is observed and closed. */
  finish(runId: string, stage: string): void {
    const trace = this.open.get(runId);
    if (!trace) return;
    this.open.delete(runId);
    trace.mark(stage);
    for (const { stage: name, seconds } of trace.stages()) this.observe(name, seconds);
    this.observe('total', ((trace.marks.at(-1)?.at ?? trace.startedAt) - trace.startedAt) / 1000);
  }
}
