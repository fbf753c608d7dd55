import type { Intent } from '../../actors/runs/intent-recorder.ts';
import type { RunInput } from '../../machines/run.types.ts';
import type { ReplayStep } from './types.ts';

/** The event as a step shows it: no `type`/`at` (shown apart), and a run input reduced to its shape. */
export function compactEvent(event: { type: string; at?: number }): Record<string, unknown> {
  const { type: _type, at: _at, ...rest } = event as Record<string, unknown>;
  if (event.type !== 'run.created') return rest;
  const input = rest['input'] as RunInput | undefined;
  return { workflowName: input?.workflowName, jobs: input?.jobs.map((job) => job.key) ?? [], createdAt: input?.createdAt };
}

/** Deadline intents become armed/disarmed lists; every other intent is an effect. */
export function splitIntents(
  intents: Intent[],
  event: { type: string },
): Pick<ReplayStep, 'intents' | 'deadlines'> {
  const deadlines: ReplayStep['deadlines'] = { armed: [], disarmed: [], fired: null };
  if (event.type.startsWith('timer.') && 'deadlineId' in event) deadlines.fired = String(event.deadlineId);
  const effects: ReplayStep['intents'] = [];
  for (const intent of intents) {
    if (intent.type === 'armDeadline') deadlines.armed.push(intent.params);
    else if (intent.type === 'disarmDeadline') deadlines.disarmed.push(intent.params.id);
    else effects.push({ type: intent.type, params: intent.params });
  }
  return { intents: effects, deadlines };
}

/** `assigned.running.started` for `{ assigned: { running: 'started' } }`; parallel regions joined by `|`. */
export function stateText(value: unknown): string {
  if (typeof value === 'string') return value;
  if (typeof value !== 'object' || value === null) return String(value);
  return Object.entries(value as Record<string, unknown>)
    .map(([key, inner]) => `${key}.${stateText(inner)}`)
    .join('|');
}
