import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import { AgentEffects } from '../actors/agents/effects.ts';
import type { AgentEffectsDeps } from '../actors/agents/effects.ts';
import { AgentRegistry } from '../actors/agents/registry.ts';
import { ConcurrencyGroups } from '../actors/concurrency/groups.ts';
import { Dispatcher } from '../actors/agents/dispatcher.ts';
import { EventRouter } from '../actors/runs/event-router.ts';
import type { EventRouterOptions } from '../actors/runs/event-router.ts';
import { EffectExecutor } from '../actors/runs/effect-executor.ts';
import type { FencedError } from '../actors/runs/errors.ts';
import { createRuntimeMetrics } from '../actors/runs/metrics.ts';
import { Ownership } from '../actors/runs/ownership.ts';
import { reattachRuns } from '../actors/runs/reattach.ts';
import type { EffectHandlers, NewRun } from '../actors/runs/ports.ts';
import type { Clock } from '../actors/clock.ts';
import { Supervisor } from '../actors/runs/supervisor.ts';
import type { CompiledConfig } from './config/index.ts';
import { updateConcurrencyGroup } from './db/concurrency-groups.ts';
import { deleteInboxEvents, enqueueRunEvent, peekInbox } from './db/inbox.ts';
import { readRunInputSummary } from './db/run-queries.ts';
import { createRunStore } from './db/run-store.ts';
import type { Schema } from './db/schema.ts';
import { createPeers } from './peers.ts';
import type { ListenForPeers } from './peers.ts';
import { RunSources } from './pipeline/run-source.ts';
import { buildDispatch } from './ws/dispatch-builder.ts';

export interface RuntimeDeps {
  config: CompiledConfig;
  db: Kysely<Schema>;
  clock: Clock;
  log: Logger;
  registry: Registry;
  onFenced: (error: FencedError) => void;
  /** Wake-ups from peer coordinators; without it their tables are polled often. */
  listen?: ListenForPeers;
}

/** With signals the tables are read when a peer writes and only checked now and then; without, often. */
const POLL_WITH_SIGNALS_MS = 2_000;
const POLL_WITHOUT_SIGNALS_MS = 200;

function createRouter(deps: RuntimeDeps, supervisor: Supervisor, hooks: Pick<EventRouterOptions, 'onUndeliverable' | 'canDrain'>): EventRouter {
  const { db, config, clock, log } = deps;
  const inbox = {
    enqueue: (runId: string, event: unknown) => enqueueRunEvent(db, { runId, event, now: clock.now() }),
    peek: (limit: number) => peekInbox(db, { coordinatorId: config.coordinatorId, limit }),
    remove: (ids: number[]) => deleteInboxEvents(db, ids),
  };
  return new EventRouter({ supervisor, inbox, clock, log: log.child({ component: 'router' }), pollMs: pollMsOf(deps), ...hooks });
}

function pollMsOf(deps: RuntimeDeps): number {
  return deps.listen ? POLL_WITH_SIGNALS_MS : POLL_WITHOUT_SIGNALS_MS;
}

/** Dispatch, cancel, close and slot release, with dispatches built from the run's frozen source. */
function createAgentEffects(deps: RuntimeDeps, parts: Pick<AgentEffectsDeps, 'registry' | 'shared' | 'deliver'> & { sources: RunSources }): AgentEffects {
  const { clock } = deps;
  return new AgentEffects({
    ...{ registry: parts.registry, shared: parts.shared, deliver: parts.deliver, aliveWindowMs: deps.config.dispatchAckTimeoutMs, now: () => clock.now() },
    log: deps.log.child({ component: 'agent-effects' }),
    buildDispatch: async (target) => {
      const source = await parts.sources.of(target.runId);
      if (!source) return { ok: false, reason: `run ${target.runId} has no stored source to build a dispatch from` };
      return buildDispatch(source, target, clock.now());
    },
  });
}

/** Every effect kind and who carries it out: a kind without a handler here does not compile. */
function effectHandlers(dispatcher: Dispatcher, agents: AgentEffects, groups: ConcurrencyGroups): EffectHandlers {
  return {
    requestPlacement: (effect) => dispatcher.requestPlacement(effect),
    sendDispatch: (effect) => agents.sendDispatch(effect),
    sendCancel: (effect) => agents.sendCancel(effect),
    closeAgentConnection: (effect) => agents.closeAgentConnection(effect),
    releaseSlot: (effect) => agents.releaseSlot(effect),
    requestConcurrency: (effect) => groups.request(effect),
    releaseConcurrency: (effect) => groups.release(effect),
  };
}

/** The actor runtime of one coordinator: supervisor, ownership, dispatcher, effect executor. */
export function createRuntime(deps: RuntimeDeps) {
  const { config, clock, log } = deps;
  const metrics = createRuntimeMetrics(deps.registry);
  // Read at every write: the epoch ownership holds right now (it changes only by re-claiming).
  const store = createRunStore(deps.db, { coordinatorId: config.coordinatorId, epoch: () => ownership.epoch }, clock);
  const supervisor = new Supervisor({
    ...{ store, clock, log, metrics, maxBatch: config.commitMaxBatch, batching: config.commitBatching },
    executeEffects: (effects) => executor.execute(effects),
    onFenced: deps.onFenced,
  });
  const router = createRouter(deps, supervisor, {
    // A grant that reaches a run that ended: the slot it reserved goes back.
    onUndeliverable: (_runId, event) => {
      if (event.type === 'placement.granted') void peers.shared.release(event.agentId, event.dispatchId).catch(() => undefined);
    },
    canDrain: () => !ownership.adopting,
  });
  const { db } = deps;
  const deliver = (runId: string, event: Parameters<EventRouter['deliver']>[1]) => router.deliver(runId, event);
  const registry = new AgentRegistry(() => clock.now());
  const dispatcher = new Dispatcher(registry, deliver, log.child({ component: 'dispatcher' }));
  const peers = createPeers({ db, coordinatorId: config.coordinatorId, clock, log, supervisor, registry, dispatcher, router, deliver, pollMs: pollMsOf(deps), aliveWindowMs: config.dispatchAckTimeoutMs });
  supervisor.observe((update) => {
    if (['success', 'failed', 'cancelled'].includes(update.status)) dispatcher.forgetRun(update.runId);
  });
  const groups = new ConcurrencyGroups((key, change) => updateConcurrencyGroup(db, key, clock.now(), change), deliver, clock);
  const sources = new RunSources((runId) => readRunInputSummary(db, runId));
  const agents = createAgentEffects(deps, { registry, shared: peers.shared, deliver, sources });
  const handlers = effectHandlers(dispatcher, agents, groups);
  const executor = new EffectExecutor({ handlers, markDone: (ids) => store.markEffectsDone(ids), clock, log, metrics });
  const ownership = new Ownership(supervisor, {
    ...{ coordinatorId: config.coordinatorId, renewMs: config.leaseRenewMs, ttlMs: config.leaseTtlMs },
    ...{ store, clock, metrics, log: log.child({ component: 'ownership' }) },
    onAdopted: async (runIds) => {
      await reattachRuns({ supervisor, registry, dispatcher, deliver, shared: peers.shared, log }, runIds);
      router.wake();
    },
    onFenced: (error) => {
      supervisor.stopAll();
      deps.onFenced(error);
    },
  });
  return {
    ...{ supervisor, router, dispatcher, registry, deliver, executor, ownership, shared: peers.shared },
    /** Creates a run here; its source is kept for its dispatches. */
    createRun(run: NewRun): Promise<void> {
      sources.remember(run.input.runId, run.inputSummary);
      return supervisor.createRun(run);
    },
    async start() {
      // A restart under the same id first forgets its old sessions, so restored jobs see their agents gone.
      await peers.start(deps.listen);
      await ownership.start();
      router.start();
    },
    /** Stops writing; with `release`, gives the lease up so a peer adopts the runs at once, not after the TTL. */
    async stop(options: { release?: boolean } = {}) {
      router.stop();
      await peers.stop();
      supervisor.stopAll();
      executor.stop();
      await ownership.stop(options);
    },
  };
}

export type Runtime = ReturnType<typeof createRuntime>;
