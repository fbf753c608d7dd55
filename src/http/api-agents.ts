import type { Kysely } from 'kysely';
import type { AgentRegistry, AgentSession } from '../../actors/agents/registry.ts';
import { coordinatorHttpUrl, listLiveAgentSessions, type AgentSessionRow } from '../db/agent-sessions.ts';
import { listOpenAttemptsByAgent } from '../db/run-queries.ts';
import type { Schema } from '../db/schema.ts';
import { MAX_LIMIT, pageOf, readPage } from './pagination.ts';
import { HttpError, sendJson } from './respond.ts';
import type { RouteContext, Router } from './router.ts';

/** RFC 6455 normal closure: the agent was asked to go, it did nothing wrong. */
const NORMAL_CLOSURE = 1000;

export interface AgentApiDeps {
  db: Kysely<Schema>;
  coordinatorId: string;
  /** The agents connected to this coordinator. */
  agents: AgentRegistry;
  now: () => number;
}

/** One connected agent as `GET /api/v1/agents` shows it. */
export interface AgentView {
  agentId: string;
  labels: string[];
  /** Slots held: this coordinator's count for its own agents, open attempts in the job projection for a peer's. */
  slotsUsed: number;
  maxConcurrency: number;
  coordinatorId: string;
  /** When the session was recorded; null for one connected here that is not recorded yet. */
  connectedAt: number | null;
  scalerManaged: boolean;
  /** Why the agent is not offered new jobs (known for this coordinator's agents only). */
  unusable: string | null;
  /** The jobs it runs: its slots here, its open attempts in the job projection for a peer's. */
  jobs: { runId: string; jobKey: string }[];
}

const DISCONNECT_REASON = 'disconnected by an administrator';

/** Agent sessions (docs/http-api.md#routes): every coordinator's, from the shared table; disconnect one of ours. */
export function registerAgentRoutes(router: Router, deps: AgentApiDeps): void {
  router
    .on('GET', '/api/v1/agents', async ({ res, url }) => {
      const page = readPage<[string]>(url, ['string'], MAX_LIMIT);
      const after = page.after?.[0];
      const agents = (await listAgents(deps)).filter((agent) => after === undefined || agent.agentId > after);
      const { items, nextCursor } = pageOf(agents, page.limit, (agent) => [agent.agentId]);
      sendJson(res, 200, { agents: items, nextCursor });
    })
    .on('DELETE', '/api/v1/agents/:id', (ctx) => disconnectRoute(deps, ctx));
}

async function listAgents(deps: AgentApiDeps): Promise<AgentView[]> {
  const rows = await listLiveAgentSessions(deps.db, deps.now());
  const local = deps.agents.all();
  const localIds = new Set(local.map((session) => session.agentId));
  const recorded = new Map(rows.map((row) => [row.agentId, row]));
  const peers = rows.filter((row) => row.coordinatorId !== deps.coordinatorId && !localIds.has(row.agentId));
  const open = await listOpenAttemptsByAgent(deps.db, peers.map((row) => row.agentId));
  const views = [
    ...local.map((session) => localView(session, deps.coordinatorId, recorded.get(session.agentId))),
    ...peers.map((row) => peerView(row, open.get(row.agentId) ?? [])),
  ];
  // Code-unit order, as the cursor compares ids.
  return views.sort((a, b) => (a.agentId < b.agentId ? -1 : a.agentId > b.agentId ? 1 : 0));
}

function localView(session: AgentSession, coordinatorId: string, row: AgentSessionRow | undefined): AgentView {
  return {
    agentId: session.agentId,
    labels: [...session.labels],
    slotsUsed: session.slots.size,
    maxConcurrency: session.maxConcurrency,
    coordinatorId,
    connectedAt: row?.coordinatorId === coordinatorId ? row.connectedAt : null,
    scalerManaged: session.scalerManaged,
    unusable: session.unusable,
    jobs: [...session.slots.values()].map(({ runId, jobKey }) => ({ runId, jobKey })),
  };
}

function peerView(row: AgentSessionRow, jobs: { runId: string; jobKey: string }[]): AgentView {
  const { agentId, labels, maxConcurrency, coordinatorId, connectedAt, scalerManaged } = row;
  return { agentId, labels, slotsUsed: jobs.length, maxConcurrency, coordinatorId, connectedAt, scalerManaged, unusable: null, jobs };
}

/**
 * Closes the agent's socket; it takes no new job here first. Its running jobs go through the usual
 * disconnect path (recovering, reclaimed if it comes back in time). A peer's agent is closed by that peer.
 */
async function disconnectRoute(deps: AgentApiDeps, { res, params }: RouteContext) {
  const agentId = params['id'] ?? '';
  const session = deps.agents.get(agentId);
  if (session) {
    deps.agents.markUnusable(agentId, DISCONNECT_REASON);
    session.link.close(NORMAL_CLOSURE, DISCONNECT_REASON);
    sendJson(res, 200, { agentId, disconnected: true, coordinatorId: deps.coordinatorId });
    return;
  }
  const remote = (await listLiveAgentSessions(deps.db, deps.now())).find((row) => row.agentId === agentId && row.coordinatorId !== deps.coordinatorId);
  if (!remote) throw new HttpError(404, 'not found', `no connected agent ${agentId}`);
  const url = await coordinatorHttpUrl(deps.db, remote.coordinatorId);
  const where = url ? ` at ${url}` : '';
  throw new HttpError(409, 'connected elsewhere', `agent ${agentId} is connected to coordinator ${remote.coordinatorId}; send the request to that coordinator${where}`);
}
