import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import type { AgentRegistry, AgentSession, DispatchRecord } from '../../actors/agents/registry.ts';
import type { SharedAgents } from '../../actors/agents/shared-agents.ts';
import { coerceError } from '../../lib/errors.ts';
import type { IncomingRunEvent, Supervisor } from '../../actors/runs/supervisor.ts';
import type { CompiledConfig } from '../config/index.ts';
import { validateAgentToken } from '../db/agent-tokens.ts';
import type { AgentTokenRecord } from '../db/agent-tokens.ts';
import { appendLogChunks } from '../db/job-logs.ts';
import { listOpenAttemptsOfAgent, readAttemptOf } from '../db/run-queries.ts';
import { storeSecretOutputs } from '../db/secrets.ts';
import type { Schema } from '../db/schema.ts';
import type { ConnectionDeps } from './connection.ts';
import { AgentRequests, type AgentRequestDeps } from './agent-requests.ts';
import { CLOSE_CODES } from './messages.ts';

export interface GatewayDeps {
  db: Kysely<Schema>;
  config: CompiledConfig;
  registry: AgentRegistry;
  shared: SharedAgents;
  supervisor: Supervisor;
  deliver: (runId: string, event: IncomingRunEvent) => Promise<unknown>;
  now: () => number;
  log: Logger;
  onUnknownType: (type: string) => void;
  onInvalidInformational: (type: string) => void;
  onViolation: ConnectionDeps['onViolation'];
  onAgentMetrics: ConnectionDeps['onAgentMetrics'];
  /** Bytes of job log lines stored (`switchyard_log_bytes_stored_total`). */
  onLogBytesStored: (bytes: number) => void;
  /** Secret values sent with each attempt, to mask what the agent sends back (SEC-4). */
  dispatchedSecrets?: ConnectionDeps['dispatchedSecrets'];
  /** User caches and provenance (null parts are not offered), emitted events, and each run's frozen source to scope them by. */
  storage: Pick<AgentRequestDeps, 'caches' | 'attestations' | 'builds' | 'idTokens' | 'sourceOf' | 'events'>;
}

/** The wiring from agent sockets to run actors: job messages in, reclaim after a reconnect (docs/protocol.md#messages-from-the-agent, docs/protocol.md#reconnect-reclaim-and-lost-attempts, docs/protocol.md#ownership-rule). */
export function createAgentGateway(deps: GatewayDeps) {
  const { db, registry, supervisor, log } = deps;
  const lookupDispatch = (dispatchId: string) => {
    const record = registry.dispatchOf(dispatchId);
    if (record?.endedAt != null && isRecovering(supervisor, record, dispatchId)) return { ...record, endedAt: null };
    return record ?? readAttemptOf(db, dispatchId);
  };
  const requests = new AgentRequests({ ...deps.storage, lookupDispatch: async (dispatchId) => (await lookupDispatch(dispatchId)) ?? null, now: deps.now, log: log.child({ component: 'agent-requests' }) });
  const connection: ConnectionDeps = {
    authMode: deps.config.agentAuth,
    requests,
    silentMs: deps.config.agentSilentMs,
    validateToken: (token) => validateAgentToken(db, token, deps.now()),
    registry,
    deliver: deps.deliver,
    lookupDispatch: async (dispatchId) => (await lookupDispatch(dispatchId)) ?? null,
    appendLogs: async (chunks) => {
      const stored = await appendLogChunks(db, chunks);
      deps.onLogBytesStored(stored);
      return stored;
    },
    reclaim: (session, inFlight) => reclaimInFlight({ ...deps, lookupDispatch }, session, inFlight),
    ...(deps.dispatchedSecrets && { dispatchedSecrets: deps.dispatchedSecrets }),
    storeSecretOutputs: (rows) => storeSecretOutputs(db, rows),
    now: deps.now,
    log: log.child({ component: 'ws' }),
    onUnknownType: deps.onUnknownType,
    onInvalidInformational: deps.onInvalidInformational,
    onViolation: deps.onViolation,
    onAgentMetrics: deps.onAgentMetrics,
  };
  /** Revocation kicks every live socket on the token (docs/protocol.md#tokens). */
  const kickToken = (record: AgentTokenRecord) => {
    for (const session of registry.all().filter((s) => s.tokenId === record.id)) {
      session.link.send({ type: 'auth.failure', reason: 'Token revoked' });
      session.link.close(CLOSE_CODES.AUTH_FAILED, 'Token revoked');
    }
  };
  return { connection, kickToken };
}

/**
 * A job in `recovering` gave its slot back, which stamps the attempt's `endedAt`, yet the attempt
 * lives on until the owner reclaims it or the window passes (docs/protocol.md#reconnect-reclaim-and-lost-attempts).
 */
function isRecovering(supervisor: Supervisor, record: DispatchRecord, dispatchId: string): boolean {
  const { runId, jobKey } = record;
  return supervisor.jobHasTag(runId, jobKey, 'awaits-reclaim') && supervisor.jobContext(runId, jobKey)?.assignment?.dispatchId === dispatchId;
}

type ReclaimDeps = GatewayDeps & { lookupDispatch: (dispatchId: string) => Promise<DispatchRecord | undefined> | DispatchRecord | undefined };

/**
 * `inFlightJobs` of a (re)registering agent (docs/protocol.md#reconnect-reclaim-and-lost-attempts): each attempt the agent still
 * runs goes back to its job actor as `agent.job.reclaim`; one the actor refuses is cancelled.
 * An attempt of this agent that it does not list lost its status with the agent's restart.
 */
async function reclaimInFlight(deps: ReclaimDeps, session: AgentSession, inFlight: { jobId: string; runId: string }[]) {
  for (const { jobId } of inFlight) {
    try {
      const record = await deps.lookupDispatch(jobId);
      if (record && record.agentId === session.agentId && record.endedAt === null) {
        deps.registry.reserve(session.agentId, jobId, { runId: record.runId, jobKey: record.jobKey });
        await deps.deliver(record.runId, { type: 'agent.job.reclaim', jobKey: record.jobKey, agentId: session.agentId, dispatchId: jobId, connectionId: session.connectionId });
        if (!deps.supervisor.owns(record.runId)) continue;
        const job = deps.supervisor.jobContext(record.runId, record.jobKey);
        if (job?.assignment?.dispatchId === jobId) continue;
        deps.registry.release(session.agentId, jobId);
      }
      deps.log.warn({ agentId: session.agentId, jobId }, 'unknown in-flight job; cancelling it on the agent');
      session.link.send({ type: 'job.cancel', messageId: jobId, runId: record?.runId ?? 'unknown', jobId, reason: 'not owned', force: true });
    } catch (thrown) {
      deps.log.error({ err: coerceError(thrown), jobId }, 'reclaim failed');
    }
  }
  await settleLostAttempts(deps, session, new Set(inFlight.map((job) => job.jobId)));
}

/**
 * An attempt of this agent that it no longer lists ended while it was away (the stock agent keeps the
 * statuses it could not send and replays them after register.ack), or was lost with the agent's
 * restart: its job gets `agent.job.lost` and waits for the replay, briefly, instead of the whole
 * recovery window (docs/protocol.md#reconnect-reclaim-and-lost-attempts). Attempts reserved on this
 * very connection are new, not lost.
 */
async function settleLostAttempts(deps: ReclaimDeps, session: AgentSession, listed: Set<string>) {
  try {
    const open = await listOpenAttemptsOfAgent(deps.db, session.agentId);
    for (const attempt of open) {
      if (listed.has(attempt.dispatchId)) continue;
      if (deps.registry.dispatchOf(attempt.dispatchId)?.connectionId === session.connectionId) continue;
      deps.log.warn({ agentId: session.agentId, runId: attempt.runId, jobKey: attempt.jobKey }, 'agent registered without a job it held; waiting for it to replay the job\'s status');
      deps.registry.release(session.agentId, attempt.dispatchId);
      await deps.deliver(attempt.runId, { type: 'agent.job.lost', jobKey: attempt.jobKey, agentId: session.agentId, dispatchId: attempt.dispatchId });
    }
  } catch (thrown) {
    deps.log.error({ err: coerceError(thrown), agentId: session.agentId }, 'settling lost attempts failed');
  }
}
