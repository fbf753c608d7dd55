/** Every `type` an envelope can carry (docs/lockfile.md#the-event-envelope). */
export const EVENT_TYPES = [
  'push',
  'tag',
  'pull_request',
  'review',
  'review_comment',
  'comment',
  'dispatch',
  'release',
  'create',
  'delete',
  'status',
  'workflow_run',
  'fork',
  'star',
  'watch',
  'generic_webhook',
  'schedule',
  'kici_event',
  'workflow_complete',
  'job_complete',
] as const;
export type EventType = (typeof EVENT_TYPES)[number];

export type EventProvider = 'github' | 'local' | 'generic';

/**
 * The normalized event (docs/lockfile.md#the-event-envelope): what triggers match against, the only binding of inline
 * expressions, `jobConfig.event` in dispatches and `ctx.event` on agents.
 */
export interface EventEnvelope {
  type: EventType;
  action?: string;
  /** The raw provider body (generic webhooks add `source` and `eventType`); parts nested over 128 levels are cut to a marker. */
  payload: Record<string, unknown>;
  /** Push branch, PR base, tag name or the default branch; `__generic__` for generic webhooks. */
  targetBranch: string;
  sourceBranch?: string;
  /** Added before matching, only when some trigger has `paths`. */
  changedFiles?: string[];
  provider?: EventProvider;
  isForkPR?: boolean;
  baseBranch?: string;
  senderUsername?: string;
  /** The numeric sender id as a string; trust decisions use it, never the login. */
  senderUserId?: string;
  /** Repository `full_name`. */
  sourceRepo?: string;
}
