import type { Kysely } from 'kysely';
import type { Schema } from '../db/schema.ts';
import { EVENT_SOURCE } from '../pipeline/emitted-event.ts';

/** One event a run emitted, where it went, and what each delivery did. */
export interface EmittedEventView {
  eventId: string;
  eventName: string;
  jobKey: string;
  createdAt: number;
  deliveries: { repository: string; status: string; runIds: string[]; reason: string | null }[];
}

/** The events `runId` emitted, oldest first, each with its deliveries' status and the runs they started. */
export async function listEmittedEvents(db: Kysely<Schema>, runId: string): Promise<EmittedEventView[]> {
  const events = await db.selectFrom('emitted_events').selectAll().where('run_id', '=', runId).orderBy('created_at').execute();
  if (events.length === 0) return [];
  const ids = events.flatMap((event) => event.targets.map((repository) => `${event.event_id}:${repository}`));
  const rows = await db.selectFrom('deliveries').select(['delivery_id', 'status', 'outcome', 'last_error']).where('source', '=', EVENT_SOURCE).where('delivery_id', 'in', ids).execute();
  const byId = new Map(rows.map((row) => [row.delivery_id, row]));
  return events.map((event) => ({
    ...{ eventId: event.event_id, eventName: event.event_name, jobKey: event.job_key, createdAt: Number(event.created_at) },
    deliveries: event.targets.map((repository) => {
      const row = byId.get(`${event.event_id}:${repository}`);
      const outcome = (row?.outcome ?? {}) as { runIds?: unknown; reason?: unknown };
      const runIds = Array.isArray(outcome.runIds) ? outcome.runIds.filter((id): id is string => typeof id === 'string') : [];
      const reason = typeof outcome.reason === 'string' ? outcome.reason : (row?.last_error ?? null);
      return { repository, status: row?.status ?? 'removed', runIds, reason };
    }),
  }));
}
