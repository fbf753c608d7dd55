import { sql, type Kysely, type RawBuilder } from 'kysely';
import type { OfferedJob, PlacementExchangeStore, ReclaimOutcome } from '../../actors/agents/placement-exchange.ts';
import type { AgentCommand, DeadSession, QueuedAgentCommand, SharedAgentStore, SharedSession } from '../../actors/agents/shared-agents.ts';
import { Batcher } from '../../lib/batcher.ts';
import { jobKeyOf } from '../../lib/job-key.ts';
import { toJson } from './json.ts';
import { recordset } from './recordset.ts';
import { PEER_JOINED, PLACEMENT_CHANNEL, coordinatorChannelSql, notifyEveryCoordinator } from './peer-bus.ts';
import type { Schema } from './schema.ts';

/** Records (or takes over) an agent's session on this coordinator. */
export async function upsertAgentSession(db: Kysely<Schema>, session: SharedSession & { tokenId: string | null; now: number }): Promise<void> {
  const row = {
    agent_id: session.agentId,
    coordinator_id: session.coordinatorId,
    connection_id: session.connectionId,
    token_id: session.tokenId,
    labels: toJson(session.labels),
    properties: toJson(session.properties),
    taints: toJson(session.taints),
    max_concurrency: session.maxConcurrency,
    scaler_managed: session.scalerManaged,
    slots_used: 0,
    connected_at: session.now,
    last_heartbeat_at: session.now,
  };
  const { agent_id: _key, ...update } = row;
  await db.insertInto('agent_sessions').values(row).onConflict((oc) => oc.column('agent_id').doUpdateSet(update)).execute();
}

/** Forgets a session when its socket closes, unless a newer connection already took the agent over. */
export async function removeAgentSession(db: Kysely<Schema>, agentId: string, connectionId: string): Promise<void> {
  await db.deleteFrom('agent_sessions').where('agent_id', '=', agentId).where('connection_id', '=', connectionId).execute();
}

/** The agent's session on a coordinator whose lease is current, or null. */
export async function liveAgentSession(db: Kysely<Schema>, agentId: string, now: number): Promise<SharedSession | null> {
  const row = await db
    .selectFrom('agent_sessions as s')
    .innerJoin('coordinators as c', 'c.id', 's.coordinator_id')
    .select(['s.agent_id', 's.coordinator_id', 's.connection_id', 's.labels', 's.properties', 's.taints', 's.max_concurrency', 's.scaler_managed'])
    .where('s.agent_id', '=', agentId)
    .where('c.lease_until', '>=', now)
    .executeTakeFirst();
  if (!row) return null;
  return {
    agentId: row.agent_id,
    coordinatorId: row.coordinator_id,
    connectionId: row.connection_id,
    labels: row.labels as string[],
    properties: row.properties as SharedSession['properties'],
    taints: row.taints as string[],
    maxConcurrency: row.max_concurrency,
    scalerManaged: row.scaler_managed,
  };
}

/** Drops the sessions of coordinators whose lease ran out (their sockets are gone); returns those sessions. */
export async function clearDeadSessions(db: Kysely<Schema>, now: number): Promise<DeadSession[]> {
  const { rows } = await sql<{ agent_id: string; connection_id: string }>`
    DELETE FROM agent_sessions s USING coordinators c
     WHERE s.coordinator_id = c.id AND c.lease_until < ${now}
    RETURNING s.agent_id, s.connection_id`.execute(db);
  return rows.map((row) => ({ agentId: row.agent_id, connectionId: row.connection_id }));
}

/** A restart under the same id: the sessions of the previous process died with it. */
export async function clearSessionsOf(db: Kysely<Schema>, coordinatorId: string): Promise<void> {
  await db.deleteFrom('agent_sessions').where('coordinator_id', '=', coordinatorId).execute();
}


/** Leaves a command for the coordinator holding the agent's socket, and wakes it; returns the command's id. */
export async function sendAgentCommand(db: Kysely<Schema>, args: { coordinatorId: string; agentId: string; command: AgentCommand; now: number }): Promise<number> {
  const { rows } = await sql<{ id: string }>`
    WITH queued AS (
      INSERT INTO agent_outbox (coordinator_id, agent_id, kind, payload, created_at)
      VALUES (${args.coordinatorId}, ${args.agentId}, ${args.command.kind}, ${toJson(args.command)}::jsonb, ${args.now})
      RETURNING id, coordinator_id)
    SELECT id, pg_notify(${coordinatorChannelSql(sql`coordinator_id`)}, 'agents') FROM queued`.execute(db);
  return Number(rows[0]?.id);
}

/**
 * Of these commands, those still waiting for their coordinator to carry them out: not once carried
 * out (their rows are deleted then), nor once that coordinator's lease has run out (the agent's
 * socket went with it).
 */
export async function agentCommandsWaiting(db: Kysely<Schema>, args: { ids: readonly number[]; now: number }): Promise<Set<number>> {
  if (args.ids.length === 0) return new Set();
  const { rows } = await sql<{ id: string }>`
    SELECT o.id FROM agent_outbox o JOIN coordinators c ON c.id = o.coordinator_id
     WHERE o.id = ANY(${[...args.ids]}::int8[]) AND c.lease_until >= ${args.now}`.execute(db);
  return new Set(rows.map((row) => Number(row.id)));
}

/** The oldest commands for this coordinator's agents; deleted once carried out. */
export async function peekAgentCommands(db: Kysely<Schema>, coordinatorId: string, limit: number): Promise<QueuedAgentCommand[]> {
  const rows = await db
    .selectFrom('agent_outbox')
    .select(['id', 'agent_id', 'payload'])
    .where('coordinator_id', '=', coordinatorId)
    .orderBy('id')
    .limit(limit)
    .execute();
  return rows.map((row) => ({ id: Number(row.id), agentId: row.agent_id, command: row.payload as AgentCommand }));
}

export async function deleteAgentCommands(db: Kysely<Schema>, ids: readonly number[]): Promise<void> {
  if (ids.length === 0) return;
  await sql`DELETE FROM agent_outbox WHERE id = ANY(${[...ids]}::int8[])`.execute(db);
}

/** A job its owner could not place on one of its own agents, offered to every coordinator's agents. */
export interface PlacementRequestRow {
  runId: string;
  jobKey: string;
  attempt: number;
  ownerId: string;
  requirements: unknown;
}

/**
 * Offers (or re-offers, for a new attempt) waiting jobs of `ownerId` to the agents of every
 * coordinator, in one statement and with one notification; a job given twice keeps its last request.
 */
export async function publishPlacementRequests(db: Kysely<Schema>, args: { ownerId: string; now: number; requests: readonly Omit<PlacementRequestRow, 'ownerId'>[] }): Promise<void> {
  const latest = new Map(args.requests.map((r) => [jobKeyOf(r.runId, r.jobKey), r]));
  const rows = toJson([...latest.values()].map((r) => ({ run_id: r.runId, job_key: r.jobKey, attempt: r.attempt, requirements: r.requirements })));
  await sql`
    WITH offered AS (
      INSERT INTO placement_requests (run_id, job_key, attempt, owner_id, requirements, created_at)
      SELECT r.run_id, r.job_key, r.attempt, ${args.ownerId}::text, r.requirements, ${args.now}::bigint
        FROM json_to_recordset(${rows}::json) AS r(run_id text, job_key text, attempt integer, requirements jsonb)
      ON CONFLICT (run_id, job_key) DO UPDATE SET attempt = excluded.attempt, owner_id = excluded.owner_id,
        requirements = excluded.requirements, created_at = excluded.created_at, claimed_by = NULL, claim_until = NULL
      RETURNING 1)
    SELECT pg_notify(${PLACEMENT_CHANNEL}, 'placement') FROM offered LIMIT 1`.execute(db);
}

/** Requests no one holds a live claim on, oldest first, except the asking coordinator's own. */
export async function openPlacementRequests(db: Kysely<Schema>, args: { except: string; now: number; limit: number }): Promise<PlacementRequestRow[]> {
  const rows = await db
    .selectFrom('placement_requests')
    .select(['run_id', 'job_key', 'attempt', 'owner_id', 'requirements'])
    .where('owner_id', '<>', args.except)
    .where((eb) => eb.or([eb('claimed_by', 'is', null), eb('claim_until', '<', args.now)]))
    .orderBy('created_at')
    .limit(args.limit)
    .execute();
  return rows.map((row) => ({ runId: row.run_id, jobKey: row.job_key, attempt: row.attempt, ownerId: row.owner_id, requirements: row.requirements }));
}

/** One attempt's request that no one holds a live claim on, or that `me` holds. */
function claimable(args: { runId: string; jobKey: string; attempt: number; me: string; now: number }): RawBuilder<unknown> {
  return sql`run_id = ${args.runId} AND job_key = ${args.jobKey} AND attempt = ${args.attempt}
    AND (claimed_by IS NULL OR claimed_by = ${args.me} OR claim_until < ${args.now})`;
}

/**
 * Claims one attempt's request for `ttlMs`: of two coordinators racing for it, one wins. A claimer
 * that dies before granting loses the claim when it runs out, and the request is open again.
 */
export async function claimPlacementRequest(db: Kysely<Schema>, args: { runId: string; jobKey: string; attempt: number; me: string; now: number; ttlMs: number }): Promise<boolean> {
  const result = await sql`UPDATE placement_requests SET claimed_by = ${args.me}, claim_until = ${args.now + args.ttlMs} WHERE ${claimable(args)}`.execute(db);
  return (result.numAffectedRows ?? 0n) > 0n;
}

/**
 * The owner takes its own request back to grant the job on one of its agents: claim and withdrawal
 * in one write, won unless a peer holds a live claim on it (or it is not there). Only a request it
 * owns: a coordinator fenced while it was stopped, whose runs were adopted, otherwise took back the
 * request its run's new owner had published, granted nothing (fenced), and left the new owner
 * holding back a job whose request was gone, for ever (chaos seeds 590879079, 826703318).
 */
export async function reclaimPlacementRequest(db: Kysely<Schema>, args: { runId: string; jobKey: string; attempt: number; me: string; now: number }): Promise<ReclaimOutcome> {
  // The EXISTS reads the table as it was before the DELETE: `present` says whether any request of the job was there.
  const { rows } = await sql<{ taken: boolean; present: boolean }>`
    WITH taken AS (DELETE FROM placement_requests WHERE ${claimable(args)} AND owner_id = ${args.me} RETURNING 1)
    SELECT EXISTS (SELECT 1 FROM taken) AS taken,
           EXISTS (SELECT 1 FROM placement_requests WHERE run_id = ${args.runId} AND job_key = ${args.jobKey}) AS present`.execute(db);
  const [row] = rows;
  return row?.taken ? 'taken' : row?.present ? 'held' : 'absent';
}

/** Whether a coordinator other than `me` holds a live lease. */
export async function peerCoordinatorsAlive(db: Kysely<Schema>, me: string, now: number): Promise<boolean> {
  const row = await db.selectFrom('coordinators').select('id').where('id', '<>', me).where('lease_until', '>', now).limit(1).executeTakeFirst();
  return row !== undefined;
}

/** Which requests a withdrawal removes: every one of the run, or of one job, or of one attempt. */
export interface PlacementWithdrawal {
  runId: string;
  jobKey?: string;
  attempt?: number;
}

/** The requests are answered (granted) or moot (their run ended): removed in one statement. */
export async function withdrawPlacementRequests(db: Kysely<Schema>, withdrawals: readonly PlacementWithdrawal[]): Promise<void> {
  if (withdrawals.length === 0) return;
  const rows = withdrawals.map((w) => toJson({ run_id: w.runId, job_key: w.jobKey ?? null, attempt: w.attempt ?? null }));
  await sql`
    DELETE FROM placement_requests p
     USING ${recordset(rows, 'w', 'run_id text, job_key text, attempt integer')} AS w
     WHERE p.run_id = w.run_id AND (w.job_key IS NULL OR p.job_key = w.job_key) AND (w.attempt IS NULL OR p.attempt = w.attempt)`.execute(db);
}

/** Withdrawals made while one is written go together in the next statement. */
const WITHDRAW_BATCH = 256;

/** How long a coordinator holds a peer's placement request it claimed before others may take it. */
const CLAIM_TTL_MS = 10_000;

/** The shared-agent tables as coordinator `me` sees them. */
export function sharedAgentStoreOf(db: Kysely<Schema>, me: string, now: () => number): SharedAgentStore {
  return {
    announce: (session) => upsertAgentSession(db, { ...session, now: now() }),
    forget: (agentId, connectionId) => removeAgentSession(db, agentId, connectionId),
    sessionOf: (agentId) => liveAgentSession(db, agentId, now()),
    send: (coordinatorId, agentId, command) => sendAgentCommand(db, { coordinatorId, agentId, command, now: now() }),
    commandsWaiting: (ids) => agentCommandsWaiting(db, { ids, now: now() }),
    peekCommands: (limit) => peekAgentCommands(db, me, limit),
    removeCommands: (ids) => deleteAgentCommands(db, ids),
    clearDeadSessions: () => clearDeadSessions(db, now()),
  };
}

/** The placement requests coordinators offer each other, as coordinator `me` sees them. */
export function placementStoreOf(db: Kysely<Schema>, me: string, now: () => number): PlacementExchangeStore {
  const withdrawals = new Batcher<PlacementWithdrawal>(async (list) => {
    await withdrawPlacementRequests(db, list);
    return list.map(() => undefined);
  }, WITHDRAW_BATCH);
  return {
    publish: (requests) => publishPlacementRequests(db, { ownerId: me, now: now(), requests }),
    open: async (limit) =>
      (await openPlacementRequests(db, { except: me, now: now(), limit })).map((row) => ({ ...row, requirements: row.requirements as OfferedJob['requirements'] })),
    claim: (job) => claimPlacementRequest(db, { ...job, me, now: now(), ttlMs: CLAIM_TTL_MS }),
    reclaim: (job) => reclaimPlacementRequest(db, { ...job, me, now: now() }),
    peersAlive: () => peerCoordinatorsAlive(db, me, now()),
    announce: () => notifyEveryCoordinator(db, PEER_JOINED),
    withdraw: (runId, jobKey, attempt) => withdrawals.add({ runId, ...(jobKey !== undefined && { jobKey }), ...(attempt !== undefined && { attempt }) }),
  };
}

/** The lease of the coordinator holding the agent's socket, if any session of the agent is recorded. */
export async function agentHolderLease(db: Kysely<Schema>, agentId: string): Promise<{ coordinatorId: string; leaseUntil: number } | null> {
  const row = await db
    .selectFrom('agent_sessions as s')
    .innerJoin('coordinators as c', 'c.id', 's.coordinator_id')
    .select(['s.coordinator_id', 'c.lease_until'])
    .where('s.agent_id', '=', agentId)
    .executeTakeFirst();
  return row ? { coordinatorId: row.coordinator_id, leaseUntil: Number(row.lease_until) } : null;
}
