/** The statuses a job ends in. */
export const TERMINAL_JOB_STATUSES = ['success', 'failed', 'cancelled', 'skipped', 'timed_out_stale', 'drift_dropped'] as const;
export type TerminalJobStatus = (typeof TERMINAL_JOB_STATUSES)[number];

/** Job statuses as the API and the wire know them (KiCI set, STAT-3). */
export const JOB_STATUSES = ['pending', 'queued', 'running', 'recovering', 'cancelling', ...TERMINAL_JOB_STATUSES] as const;
export type JobStatus = (typeof JOB_STATUSES)[number];

/** The tag a job state carries for the status it shows: the chart answers, nobody maps its states. */
export type JobStatusTag = `status:${JobStatus}`;

/** The status a job state's tags name, or null for a transient state, which names none. */
export function jobStatusOfTags(tags: ReadonlySet<string>): JobStatus | null {
  return JOB_STATUSES.find((status) => tags.has(`status:${status}`)) ?? null;
}

export const RUN_STATUSES = ['pending', 'held', 'running', 'cancelling', 'success', 'failed', 'cancelled'] as const;
export type RunStatus = (typeof RUN_STATUSES)[number];

/** The tag a run state carries for the status it shows. */
export type RunStatusTag = `status:${RunStatus}`;

/** The status a run state's tags name, or null for a transient state, which names none. */
export function runStatusOfTags(tags: ReadonlySet<string>): RunStatus | null {
  return RUN_STATUSES.find((status) => tags.has(`status:${status}`)) ?? null;
}
export type TerminalRunStatus = 'success' | 'failed' | 'cancelled';

export function isTerminalJobStatus(status: string): status is TerminalJobStatus {
  return (TERMINAL_JOB_STATUSES as readonly string[]).includes(status);
}

export function isTerminalRunStatus(status: string): status is TerminalRunStatus {
  return status === 'success' || status === 'failed' || status === 'cancelled';
}

/** Statuses that make a run (or a fan-out aggregate) count as failed (STAT-2, DAG-3). */
export function countsAsFailure(status: TerminalJobStatus): boolean {
  switch (status) {
    case 'failed':
    case 'timed_out_stale':
    case 'drift_dropped':
      return true;
    case 'success':
    case 'cancelled':
    case 'skipped':
      return false;
    default:
      return assertNever(status);
  }
}

/** Aggregate status of a fan-out's children, used for needs on the base name (DAG-3). */
export function aggregateStatus(children: readonly TerminalJobStatus[]): TerminalJobStatus {
  if (children.some(countsAsFailure)) return 'failed';
  if (children.some((s) => s === 'cancelled')) return 'cancelled';
  if (children.length > 0 && children.every((s) => s === 'skipped')) return 'skipped';
  return 'success';
}

/**
 * The one run-status rule (STAT-2): failed > cancelled > success; a workflow deadline
 * that fired makes the run failed whatever its jobs ended as.
 */
export function computeRunStatus(
  jobs: readonly TerminalJobStatus[],
  options: { workflowTimedOut: boolean; initFailed: boolean },
): TerminalRunStatus {
  if (options.workflowTimedOut || options.initFailed || jobs.some(countsAsFailure)) return 'failed';
  if (jobs.some((s) => s === 'cancelled')) return 'cancelled';
  return 'success';
}

export function assertNever(value: never): never {
  throw new Error(`unexpected value: ${JSON.stringify(value)}`);
}
