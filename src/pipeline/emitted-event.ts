import { z } from 'zod';
import type { Dropped, NormalizedEvent } from '../pipeline/normalized-event.ts';

/** The `source` of every delivery an emitted event makes (one per repository it reaches). */
export const EVENT_SOURCE = 'event';

/** Past this many events in a chain (an event's run emitting the next), an emit is refused. */
export const MAX_CHAIN_DEPTH = 5;

/** What one delivery of an emitted event stores: the event, who sent it, and where it goes. */
export const emittedEventBody = z.strictObject({
  eventId: z.string().min(1),
  eventName: z.string().min(1),
  payload: z.record(z.string(), z.unknown()),
  /** The repository whose workflows it may start. */
  repository: z.string().min(1),
  defaultBranch: z.string().min(1),
  sourceRepo: z.string().min(1),
  sourceRunId: z.string().min(1),
  sourceJobKey: z.string().min(1),
  /** The sending run's trust, which the runs it starts inherit (an untrusted sender's events start untrusted runs). */
  trustTier: z.enum(['trusted', 'known', 'unknown']),
  chainDepth: z.number().int().min(1),
});
export type EmittedEventBody = z.output<typeof emittedEventBody>;

/**
 * An emitted event as the envelope `kici_event` triggers match (docs/events.md): `payload` is
 * `{eventName, payload, sourceRepo, sourceRunId, sourceJobKey, chainDepth, trustTier}` as the stock
 * agent's `ctx.event` reads it, and the lock file is read at the head of the default branch.
 */
export function normalizeEmittedEvent(raw: unknown): NormalizedEvent | Dropped {
  const parsed = emittedEventBody.safeParse(raw);
  if (!parsed.success) return { dropped: `malformed emitted event: ${parsed.error.issues[0]?.message ?? 'invalid body'}` };
  const { eventName, payload, repository, defaultBranch, sourceRepo, sourceRunId, sourceJobKey, chainDepth, trustTier } = parsed.data;
  return {
    envelope: {
      type: 'kici_event',
      targetBranch: defaultBranch,
      payload: { eventName, payload, sourceRepo, sourceRunId, sourceJobKey, chainDepth, trustTier },
      sourceRepo: repository,
    },
    sha: null,
    ref: `refs/heads/${defaultBranch}`,
    repository,
    cloneUrl: null,
    installationId: null,
  };
}

/** How deep in a chain of events a run started by `event` is: 0 when no emitted event started it. */
export function chainDepthOf(event: { type: string; payload: Record<string, unknown> } | null | undefined): number {
  if (event?.type !== 'kici_event') return 0;
  const depth = event.payload['chainDepth'];
  return typeof depth === 'number' && Number.isSafeInteger(depth) && depth > 0 ? depth : 0;
}

/** The event and run that started a run, read from its frozen source; null for a run no emitted event started. */
export function triggeredByOf(summary: unknown): { eventName: string; runId: string; jobKey: string; repository: string } | null {
  const event = (summary as { event?: { type?: unknown; payload?: Record<string, unknown> } } | null)?.event;
  if (event?.type !== 'kici_event' || !event.payload) return null;
  const { eventName, sourceRunId, sourceJobKey, sourceRepo } = event.payload;
  if (typeof eventName !== 'string' || typeof sourceRunId !== 'string') return null;
  return { eventName, runId: sourceRunId, jobKey: typeof sourceJobKey === 'string' ? sourceJobKey : '', repository: typeof sourceRepo === 'string' ? sourceRepo : '' };
}
