import assert from 'node:assert/strict';
import type { LockPattern, LockTrigger, LockWorkflow } from '../../../machines/lock.types.ts';
import type { EventEnvelope } from '../../../src/pipeline/envelope.ts';
import { normalizeGitHubEvent } from '../../../src/pipeline/normalize.ts';
import { isDropped } from '../../../src/pipeline/normalized-event.ts';
import { matchWorkflow } from '../../../src/pipeline/triggers.ts';

export function workflow(name: string, ...triggers: (LockTrigger | null)[]): LockWorkflow {
  return { name, triggers, jobs: [] };
}

export const g = (pattern: string): LockPattern => ({ type: 'glob', pattern });
export const r = (pattern: string, flags?: string): LockPattern => ({ type: 'regex', pattern, ...(flags ? { flags } : {}) });

/** The envelope the pipeline would match: GitHub normalization plus changed files when given. */
export function github(eventName: string, payload: unknown, changedFiles?: string[]): EventEnvelope {
  const result = normalizeGitHubEvent(eventName, payload);
  assert.ok(!isDropped(result), isDropped(result) ? result.dropped : '');
  return changedFiles === undefined ? result.envelope : { ...result.envelope, changedFiles };
}

/** Whether `trigger`, alone in a workflow, matches `event`. */
export function matches(trigger: LockTrigger, event: EventEnvelope): boolean {
  return matchWorkflow(workflow('w', trigger), event).matched;
}
