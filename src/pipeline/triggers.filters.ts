import type {
  LockCommentTrigger,
  LockGenericWebhookTrigger,
  LockKiciEventTrigger,
  LockPrTrigger,
  LockPushTrigger,
  LockRefTrigger,
  LockReviewTrigger,
  LockStatusTrigger,
  LockTrigger,
  LockWorkflowRunTrigger,
} from '../../machines/lock.types.ts';
import type { EventEnvelope } from './envelope.ts';
import { payloadMatches, stringAt, valueAt } from './triggers.payload.ts';
import { anyPatternMatches, glob, listAllows, matchesPattern, pathsMatch, reposMatch } from './triggers.patterns.ts';

/**
 * One trigger against one envelope (docs/lockfile.md#triggers): the type gate, then every filter (AND); an empty
 * filter means "any". May throw {@link TriggerPatternError}; the caller isolates it per workflow.
 */
export function triggerMatches(trigger: LockTrigger, event: EventEnvelope): boolean {
  switch (trigger._type) {
    case 'push':
      return matchPush(trigger, event);
    case 'tag':
      return event.type === 'tag' && anyPatternMatches(trigger.patterns, event.targetBranch) && repos(trigger, event);
    case 'pr':
      return matchPullRequest(trigger, event);
    case 'comment':
      return matchComment(trigger, event);
    case 'review':
      return matchReview(trigger, event);
    case 'review_comment':
    case 'release':
    case 'star':
    case 'watch':
      return event.type === trigger._type && listAllows(trigger.actions, event.action) && repos(trigger, event);
    case 'dispatch':
      return event.type === 'dispatch' && listAllows(trigger.types, event.action) && repos(trigger, event);
    case 'create':
    case 'delete':
      return matchRefEvent(trigger, event);
    case 'status':
      return matchStatus(trigger, event);
    case 'workflow_run':
      return matchWorkflowRun(trigger, event);
    case 'fork':
      return event.type === 'fork' && repos(trigger, event);
    case 'webhook':
      return listAllows(trigger.events, event.type) && listAllows(trigger.actions, event.action) && repos(trigger, event);
    case 'generic_webhook':
      return matchGenericWebhook(trigger, event);
    case 'schedule':
      // The clock records one delivery per expression and zone; an event without a zone (made by hand) matches any.
      return (
        event.type === 'schedule' &&
        event.payload.cronExpression === trigger.cronExpression &&
        (event.payload.timezone === undefined || event.payload.timezone === trigger.timezone)
      );
    case 'kici_event':
      return matchKiciEvent(trigger, event);
    case 'workflow_complete':
    case 'job_complete':
    case 'lifecycle':
      return false;
    default: {
      // A type outside the union (a hand-built workflow) never matches.
      const unknownTrigger: never = trigger;
      void unknownTrigger;
      return false;
    }
  }
}

function repos(trigger: { repos?: LockPushTrigger['repos'] }, event: EventEnvelope): boolean {
  return reposMatch(trigger.repos, event.sourceRepo);
}

function matchPush(trigger: LockPushTrigger, event: EventEnvelope): boolean {
  return (
    event.type === 'push' &&
    anyPatternMatches(trigger.branches, event.targetBranch) &&
    repos(trigger, event) &&
    pathsMatch(trigger.paths, event.changedFiles)
  );
}

function matchPullRequest(trigger: LockPrTrigger, event: EventEnvelope): boolean {
  return (
    event.type === 'pull_request' &&
    listAllows(trigger.events, event.action) &&
    anyPatternMatches(trigger.targetBranches, event.targetBranch) &&
    anyPatternMatches(trigger.sourceBranches, event.sourceBranch) &&
    repos(trigger, event) &&
    pathsMatch(trigger.paths, event.changedFiles)
  );
}

/** `source` is `pr` when `payload.issue.pull_request` exists, else `issue`. */
function matchComment(trigger: LockCommentTrigger, event: EventEnvelope): boolean {
  if (event.type !== 'comment' || !listAllows(trigger.actions, event.action)) return false;
  if (trigger.source !== undefined) {
    const pullRequest = valueAt(event.payload, ['issue', 'pull_request']);
    const source = pullRequest === undefined || pullRequest === null ? 'issue' : 'pr';
    if (source !== trigger.source) return false;
  }
  if (trigger.bodyMatch !== undefined) {
    const body = stringAt(event.payload, ['comment', 'body']);
    if (body === undefined || !matchesPattern(trigger.bodyMatch, body)) return false;
  }
  return repos(trigger, event);
}

/** Review states compare case-insensitively: webhooks say `approved`, the REST API `APPROVED`. */
function matchReview(trigger: LockReviewTrigger, event: EventEnvelope): boolean {
  const state = stringAt(event.payload, ['review', 'state'])?.toLowerCase();
  const states = trigger.states.map((allowed) => allowed.toLowerCase());
  return (
    event.type === 'review' &&
    listAllows(trigger.actions, event.action) &&
    listAllows(states, state) &&
    repos(trigger, event)
  );
}

function matchRefEvent(trigger: LockRefTrigger, event: EventEnvelope): boolean {
  return (
    event.type === trigger._type &&
    listAllows(trigger.refTypes, stringAt(event.payload, ['ref_type'])) &&
    anyPatternMatches(trigger.patterns, stringAt(event.payload, ['ref'])) &&
    repos(trigger, event)
  );
}

function matchStatus(trigger: LockStatusTrigger, event: EventEnvelope): boolean {
  const context = stringAt(event.payload, ['context']);
  const contextMatches =
    trigger.contexts.length === 0 || (context !== undefined && trigger.contexts.some((pattern) => glob(pattern)(context)));
  return (
    event.type === 'status' &&
    contextMatches &&
    listAllows(trigger.states, stringAt(event.payload, ['state'])) &&
    repos(trigger, event)
  );
}

function matchWorkflowRun(trigger: LockWorkflowRunTrigger, event: EventEnvelope): boolean {
  return (
    event.type === 'workflow_run' &&
    listAllows(trigger.actions, event.action) &&
    listAllows(trigger.workflows, stringAt(event.payload, ['workflow_run', 'name'])) &&
    listAllows(trigger.conclusions, stringAt(event.payload, ['workflow_run', 'conclusion'])) &&
    repos(trigger, event)
  );
}

/** Exact `source`; `events` against `payload.eventType`, else `action`; `match` / `not` over the payload. */
function matchGenericWebhook(trigger: LockGenericWebhookTrigger, event: EventEnvelope): boolean {
  if (event.type !== 'generic_webhook' || event.payload.source !== trigger.source) return false;
  const eventType = stringAt(event.payload, ['eventType']) ?? event.action;
  return listAllows(trigger.events, eventType) && payloadMatches(event.payload, trigger.match, trigger.not);
}

/** An emitted event (docs/events.md): its name, then `match`/`not` over what the workflow emitted, then the sending repository. */
function matchKiciEvent(trigger: LockKiciEventTrigger, event: EventEnvelope): boolean {
  if (event.type !== 'kici_event' || event.payload.eventName !== trigger.eventName) return false;
  if (!payloadMatches(event.payload.payload ?? {}, trigger.match, trigger.not)) return false;
  return trigger.source === undefined || event.payload.sourceRepo === trigger.source;
}
