import { isTerminalJobStatus } from '../../machines/status.ts';

/** How long a job waited and ran, from when it last entered each status (`jobs.times`), in ms; null where it does not apply. */
export interface JobTimes {
  /** Created → dispatched (the last attempt's dispatch), including an agent's start by a scaler; so far while it still waits. */
  queuedMs: number | null;
  /** Running → ended; so far while it runs. Null when its current attempt never ran. */
  runMs: number | null;
}

function stamp(times: Record<string, unknown>, status: string): number | undefined {
  const at = times[status];
  return typeof at === 'number' ? at : undefined;
}

export function jobTimesOf(job: { status: string; times: unknown }, now: number): JobTimes {
  if (typeof job.times !== 'object' || job.times === null) return { queuedMs: null, runMs: null };
  const times = job.times as Record<string, unknown>;
  const created = stamp(times, 'pending');
  const dispatched = stamp(times, 'dispatched');
  const running = stamp(times, 'running');
  const ended = isTerminalJobStatus(job.status) ? (stamp(times, job.status) ?? now) : null;
  const queuedUntil = dispatched ?? (ended === null ? now : undefined);
  const queuedMs = created !== undefined && queuedUntil !== undefined ? Math.max(0, queuedUntil - created) : null;
  const ranThisAttempt = running !== undefined && (dispatched === undefined || running >= dispatched);
  const runMs = ranThisAttempt ? Math.max(0, (ended ?? now) - running) : null;
  return { queuedMs, runMs };
}

/** A run's total: created → finished, or so far; null when its creation time is not known. */
export function runDurationMs(run: { created_at: number | string | null; finished_at: number | string | null }, now: number): number | null {
  if (run.created_at === null) return null;
  return Math.max(0, (run.finished_at === null ? now : Number(run.finished_at)) - Number(run.created_at));
}
