import { CronExpressionParser } from 'cron-parser';
import { z } from 'zod';
import { coerceError } from '../../lib/errors.ts';
import type { LockWorkflow } from '../../machines/lock.types.ts';
import type { Dropped, NormalizedEvent } from './normalized-event.ts';

/** The `source` of every delivery the schedule clock records. */
export const SCHEDULE_SOURCE = 'schedule';

/** What a schedule delivery stores: which schedule of which repository fired, for which minute. */
export const scheduleBody = z.strictObject({
  repository: z.string().min(1),
  branch: z.string().min(1),
  cronExpression: z.string().min(1),
  timezone: z.string().min(1),
  /** The minute the expression fired for, ISO 8601 in UTC. */
  scheduledAt: z.string().min(1),
});
export type ScheduleBody = z.output<typeof scheduleBody>;

export interface Schedule {
  cronExpression: string;
  timezone: string;
}

/**
 * A schedule delivery as an event (docs/lockfile.md#schedules): `{type: "schedule", payload:
 * {cronExpression, timezone, scheduledAt}}`, read at the head of the default branch.
 */
export function normalizeScheduleEvent(raw: unknown): NormalizedEvent | Dropped {
  const parsed = scheduleBody.safeParse(raw);
  if (!parsed.success) return { dropped: `malformed schedule delivery: ${parsed.error.issues[0]?.message ?? 'invalid body'}` };
  const { repository, branch, cronExpression, timezone, scheduledAt } = parsed.data;
  return {
    envelope: { type: 'schedule', targetBranch: branch, payload: { cronExpression, timezone, scheduledAt }, sourceRepo: repository },
    sha: null,
    ref: `refs/heads/${branch}`,
    repository,
    cloneUrl: null,
    installationId: null,
  };
}

/** Every distinct schedule the workflows' `schedule` triggers name. */
export function schedulesOf(workflows: readonly LockWorkflow[]): Schedule[] {
  const schedules = new Map<string, Schedule>();
  for (const trigger of workflows.flatMap((workflow) => workflow.triggers ?? [])) {
    if (trigger?._type !== 'schedule') continue;
    const schedule = { cronExpression: trigger.cronExpression, timezone: trigger.timezone };
    schedules.set(JSON.stringify(schedule), schedule);
  }
  return [...schedules.values()];
}

export const MINUTE_MS = 60_000;

/**
 * Why a schedule can never fire: five fields (minute hour day month weekday), six with seconds
 * first, or a macro such as `@daily`, in an IANA time zone. Null when it is valid.
 */
export function scheduleProblem({ cronExpression, timezone }: Schedule): string | null {
  const fields = cronExpression.trim().split(/\s+/).length;
  if (!cronExpression.trim().startsWith('@') && fields !== 5 && fields !== 6) {
    return `cron expression ${JSON.stringify(cronExpression)} has ${fields} fields; it needs 5 (minute hour day month weekday) or 6`;
  }
  try {
    new Intl.DateTimeFormat('en', { timeZone: timezone });
  } catch {
    return `time zone ${JSON.stringify(timezone)} is not an IANA time zone`;
  }
  try {
    CronExpressionParser.parse(cronExpression, { tz: timezone });
    return null;
  } catch (thrown) {
    return `cron expression ${JSON.stringify(cronExpression)}: ${coerceError(thrown).message}`;
  }
}

/** Whether a valid schedule fires during the minute that starts at `minuteStart` (ms since the epoch). */
export function firesInMinute({ cronExpression, timezone }: Schedule, minuteStart: number): boolean {
  const next = CronExpressionParser.parse(cronExpression, { currentDate: new Date(minuteStart - 1), tz: timezone }).next();
  return next.getTime() < minuteStart + MINUTE_MS;
}
