import type { LockWorkflow } from '../../machines/lock.types.ts';
import { coerceError } from '../../lib/errors.ts';
import type { EventEnvelope, EventType } from './envelope.ts';
import { triggerMatches } from './triggers.filters.ts';

export { TriggerPatternError } from './triggers.patterns.ts';

export type TriggerMatch = { matched: true; trigger: number } | { matched: false };

/** Per workflow: matched (with the index of the first matching trigger), not matched, or failed. */
export type WorkflowMatchOutcome =
  | { workflow: LockWorkflow; outcome: 'matched'; trigger: number }
  | { workflow: LockWorkflow; outcome: 'no_match' }
  | { workflow: LockWorkflow; outcome: 'error'; error: Error };

/** The trigger types Switchyard v1 matches (docs/lockfile.md#triggers); the parser accepts the others too. */
export const MATCHED_TRIGGER_TYPES: ReadonlySet<string> = new Set([
  'push',
  'tag',
  'pr',
  'comment',
  'review',
  'review_comment',
  'release',
  'dispatch',
  'create',
  'delete',
  'status',
  'workflow_run',
  'fork',
  'star',
  'watch',
  'webhook',
  'generic_webhook',
  'schedule',
  'kici_event',
]);

/**
 * Triggers are OR'd, first match wins; `null` entries are skipped; no triggers never matches
 * (docs/lockfile.md#triggers). Throws when a trigger cannot be evaluated; {@link matchWorkflows} isolates that.
 */
export function matchWorkflow(workflow: LockWorkflow, envelope: EventEnvelope): TriggerMatch {
  for (const [index, trigger] of (workflow.triggers ?? []).entries()) {
    if (trigger !== null && triggerMatches(trigger, envelope)) return { matched: true, trigger: index };
  }
  return { matched: false };
}

/** Each workflow on its own: one workflow whose trigger throws never stops the others (B15). */
export function matchWorkflows(workflows: readonly LockWorkflow[], envelope: EventEnvelope): WorkflowMatchOutcome[] {
  return workflows.map((workflow): WorkflowMatchOutcome => {
    try {
      const match = matchWorkflow(workflow, envelope);
      return match.matched ? { workflow, outcome: 'matched', trigger: match.trigger } : { workflow, outcome: 'no_match' };
    } catch (thrown) {
      return { workflow, outcome: 'error', error: coerceError(thrown) };
    }
  });
}

/**
 * Changed files are listed only when a trigger that can match this event type has `paths`: a
 * `push` trigger for a push, a `pr` trigger for a pull request (docs/lockfile.md#changed-files).
 */
export function workflowNeedsChangedFiles(workflow: LockWorkflow, type: EventType): boolean {
  return (workflow.triggers ?? []).some((trigger) => {
    if (trigger?._type === 'push') return type === 'push' && trigger.paths.length > 0;
    if (trigger?._type === 'pr') return type === 'pull_request' && trigger.paths.length > 0;
    return false;
  });
}

/** Trigger types in these workflows that never match, to be logged once per lock file. */
export function unmatchedTriggerTypes(workflows: readonly LockWorkflow[]): string[] {
  const types = workflows.flatMap((workflow) => (workflow.triggers ?? []).flatMap((trigger) => trigger?._type ?? []));
  return [...new Set(types)].filter((type) => !MATCHED_TRIGGER_TYPES.has(type));
}
