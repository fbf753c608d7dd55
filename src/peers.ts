import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import type { AgentRegistry } from '../actors/agents/registry.ts';
import type { Dispatcher } from '../actors/agents/dispatcher.ts';
import { coerceError } from '../lib/errors.ts';
import type { EventRouter } from '../actors/runs/event-router.ts';
import { PlacementExchange } from '../actors/agents/placement-exchange.ts';
import type { OfferedJob } from '../actors/agents/placement-exchange.ts';
import type { Clock } from '../actors/clock.ts';
import { SharedAgents } from '../actors/agents/shared-agents.ts';
import type { AgentCommand, SharedSession } from '../actors/agents/shared-agents.ts';
import type { Supervisor } from '../actors/runs/supervisor.ts';
import { PLACEMENT_CHANNEL, coordinatorChannel } from './db/peer-bus.ts';
import type { PeerListener } from './db/peer-bus.ts';
import type { Schema } from './db/schema.ts';
import * as q from './db/shared-agents.ts';

/** Subscribes to peer signals (Postgres LISTEN on a connection of its own). */
export type ListenForPeers = (channels: string[], onSignal: (payload: string) => void) => PeerListener;

export interface PeerWiring {
  db: Kysely<Schema>;
  coordinatorId: string;
  clock: Clock;
  log: Logger;
  supervisor: Supervisor;
  registry: AgentRegistry;
  dispatcher: Dispatcher;
  router: EventRouter;
  deliver: EventRouter['deliver'];
  /** How often peers' tables are read without a signal. */
  pollMs: number;
  /** An agent that sent a frame this recently is alive: a peer's 4031 request does not close it. */
  aliveWindowMs: number;
}

const CLAIM_TTL_MS = 10_000;

/**
 * Coordinators on one database share their agents (FO-3): sessions are recorded for peers, jobs no
 * agent here can take are offered to peers' agents, and commands for an agent go to the coordinator
 * holding its socket. Postgres NOTIFY wakes the reader; a slow poll covers signals lost in a reconnect.
 */
export function createPeers(wiring: PeerWiring) {
  const { db, coordinatorId: me, clock, log } = wiring;
  const now = () => clock.now();
  const shared = new SharedAgents(me, sharedAgentStore(db, me, now), wiring.registry, log.child({ component: 'shared-agents' }), wiring.aliveWindowMs);
  const exchange = new PlacementExchange(placementStore(db, me, now), wiring.registry, (job) => wiring.dispatcher.findFor(job), wiring.deliver, log.child({ component: 'exchange' }));
  wiring.dispatcher.attachExchange(exchange, (runId, jobKey) => wiring.supervisor.jobHasTag(runId, jobKey, 'waits-for-agent'));
  let timer: unknown = null;
  let listener: PeerListener | null = null;
  const quietly = (work: Promise<unknown>, what: string) =>
    void work.catch((thrown: unknown) => log.warn({ err: coerceError(thrown) }, `${what} failed`));
  const onSignal = (payload: string) => {
    if (payload === 'inbox' || payload === 'reconnected') wiring.router.wake();
    if (payload === 'agents' || payload === 'reconnected') quietly(shared.drainCommands(), 'carrying out agent commands');
    if (payload === 'placement' || payload === 'reconnected') quietly(exchange.offerRemote(), 'offering agents to peers');
  };
  const tick = () => {
    quietly(shared.drainCommands(), 'carrying out agent commands');
    quietly(exchange.offerRemote(), 'offering agents to peers');
    quietly(disconnectDeadPeersAgents(wiring, shared), 'finding agents of dead coordinators');
    timer = clock.setTimeout(tick, wiring.pollMs);
  };
  return {
    shared,
    exchange,
    async start(listen?: ListenForPeers) {
      await q.clearSessionsOf(db, me);
      listener = listen ? listen([coordinatorChannel(me), PLACEMENT_CHANNEL], onSignal) : null;
      timer = clock.setTimeout(tick, wiring.pollMs);
    },
    async stop() {
      if (timer !== null) clock.clearTimeout(timer);
      await listener?.close();
      await q.clearSessionsOf(db, me).catch(() => undefined);
    },
  };
}

/** Jobs here on an agent whose coordinator died lost their socket with it: they go recovering. */
async function disconnectDeadPeersAgents(wiring: PeerWiring, shared: SharedAgents): Promise<void> {
  const dead = new Set(await shared.clearDeadSessions());
  if (dead.size === 0) return;
  for (const runId of wiring.supervisor.ownedRunIds()) {
    for (const job of wiring.supervisor.jobsOf(runId)) {
      const agentId = job.context.assignment?.agentId;
      if (agentId === undefined || !dead.has(agentId) || wiring.registry.get(agentId)) continue;
      if (!wiring.supervisor.jobHasTag(runId, job.jobKey, 'holds-slot')) continue;
      await wiring.deliver(runId, { type: 'agent.disconnected', jobKey: job.jobKey, agentId, cause: 'coordinator' });
    }
  }
}

function sharedAgentStore(db: Kysely<Schema>, me: string, now: () => number) {
  return {
    announce: (session: SharedSession & { tokenId: string | null }) => q.upsertAgentSession(db, { ...session, now: now() }),
    forget: (agentId: string, connectionId: string) => q.removeAgentSession(db, agentId, connectionId),
    sessionOf: (agentId: string) => q.liveAgentSession(db, agentId, now()),
    send: (coordinatorId: string, agentId: string, command: AgentCommand) => q.sendAgentCommand(db, { coordinatorId, agentId, command, now: now() }),
    peekCommands: (limit: number) => q.peekAgentCommands(db, me, limit),
    removeCommands: (ids: number[]) => q.deleteAgentCommands(db, ids),
    clearDeadSessions: () => q.clearDeadSessions(db, now()),
  };
}

function placementStore(db: Kysely<Schema>, me: string, now: () => number) {
  return {
    publish: (job: OfferedJob) => q.publishPlacementRequest(db, { ...job, ownerId: me, now: now() }),
    open: async (limit: number) =>
      (await q.openPlacementRequests(db, { except: me, now: now(), limit })).map((row) => ({ ...row, requirements: row.requirements as OfferedJob['requirements'] })),
    claim: (job: OfferedJob) => q.claimPlacementRequest(db, { ...job, me, now: now(), ttlMs: CLAIM_TTL_MS }),
    withdraw: (runId: string, jobKey?: string, attempt?: number) =>
      q.withdrawPlacementRequests(db, { runId, ...(jobKey !== undefined && { jobKey }), ...(attempt !== undefined && { attempt }) }),
  };
}
