import { sql } from 'kysely';
import type { Kysely } from 'kysely';
import { toJson } from './json.ts';
import { coordinatorChannelSql } from './peer-bus.ts';
import type { Schema } from './schema.ts';
import type { InboxStore } from '../../actors/runs/event-router.ts';

export interface InboxEvent {
  id: number;
  runId: string;
  event: unknown;
}

/**
 * Leaves an event for the coordinator that owns `runId` (FO-4: non-owners only send messages) and
 * wakes it with a NOTIFY, delivered when this insert commits. An event for a run that has finished
 * (or never existed) is not kept: its owner would only drop it, and if that owner is gone no
 * coordinator would ever read it. Returns whether the event was kept.
 */
export async function enqueueRunEvent(db: Kysely<Schema>, { runId, event, now }: { runId: string; event: unknown; now: number }): Promise<boolean> {
  const { rows } = await sql`
    WITH queued AS (
      INSERT INTO run_inbox (run_id, event, created_at)
      SELECT ${runId}::text, ${toJson(event)}::json, ${now}::int8 WHERE EXISTS (SELECT 1 FROM run_owner WHERE run_id = ${runId}::text AND live)
      RETURNING run_id)
    SELECT pg_notify(${coordinatorChannelSql(sql`o.coordinator_id`)}, 'inbox')
      FROM queued JOIN run_owner o USING (run_id)`.execute(db);
  return rows.length > 0;
}

/** The oldest inbox events of runs this coordinator owns; deleted only after delivery (at-least-once). */
export async function peekInbox(db: Kysely<Schema>, { coordinatorId, limit }: { coordinatorId: string; limit: number }): Promise<InboxEvent[]> {
  const { rows } = await sql<{ id: string | number; run_id: string; event: unknown }>`
    SELECT i.id, i.run_id, i.event FROM run_inbox i JOIN run_owner o ON o.run_id = i.run_id
     WHERE o.coordinator_id = ${coordinatorId} ORDER BY i.id LIMIT ${limit}`.execute(db);
  return rows.map((row) => ({ id: Number(row.id), runId: row.run_id, event: row.event }));
}

export async function deleteInboxEvents(db: Kysely<Schema>, ids: number[]): Promise<void> {
  if (ids.length === 0) return;
  await sql`DELETE FROM run_inbox WHERE id = ANY(${ids}::int8[])`.execute(db);
}

/** The run inbox as coordinator `coordinatorId` reads it. */
export function runInboxOf(db: Kysely<Schema>, coordinatorId: string, now: () => number): InboxStore {
  return {
    enqueue: (runId, event) => enqueueRunEvent(db, { runId, event, now: now() }),
    peek: (limit) => peekInbox(db, { coordinatorId, limit }),
    remove: (ids) => deleteInboxEvents(db, ids),
  };
}
