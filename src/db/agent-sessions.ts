import type { Kysely } from 'kysely';
import type { Schema } from './schema.ts';

/** An agent session as the shared table records it (FO-3), on any coordinator. */
export interface AgentSessionRow {
  agentId: string;
  coordinatorId: string;
  labels: string[];
  maxConcurrency: number;
  scalerManaged: boolean;
  connectedAt: number;
  lastHeartbeatAt: number;
}

/** The sessions of every coordinator whose lease is current, by agent id. */
export async function listLiveAgentSessions(db: Kysely<Schema>, now: number): Promise<AgentSessionRow[]> {
  const rows = await db
    .selectFrom('agent_sessions as s')
    .innerJoin('coordinators as c', 'c.id', 's.coordinator_id')
    .select(['s.agent_id', 's.coordinator_id', 's.labels', 's.max_concurrency', 's.scaler_managed', 's.connected_at', 's.last_heartbeat_at'])
    .where('c.lease_until', '>=', now)
    .orderBy('s.agent_id')
    .execute();
  return rows.map((row) => ({
    agentId: row.agent_id,
    coordinatorId: row.coordinator_id,
    labels: Array.isArray(row.labels) ? row.labels.map(String) : [],
    maxConcurrency: row.max_concurrency,
    scalerManaged: row.scaler_managed,
    connectedAt: row.connected_at,
    lastHeartbeatAt: row.last_heartbeat_at,
  }));
}

/** The coordinator's advertised HTTP URL, to point a caller at the peer that holds an agent's socket. */
export async function coordinatorHttpUrl(db: Kysely<Schema>, coordinatorId: string): Promise<string | null> {
  const row = await db.selectFrom('coordinators').select('http_url').where('id', '=', coordinatorId).executeTakeFirst();
  return row?.http_url ?? null;
}
