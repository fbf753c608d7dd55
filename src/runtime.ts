import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import { AgentRegistry } from '../actors/agent-registry.ts';
import { ConcurrencyGroups } from '../actors/concurrency-groups.ts';
import { Dispatcher } from '../actors/dispatcher.ts';
import { EventRouter } from '../actors/event-router.ts';
import { EffectExecutor } from '../actors/effect-executor.ts';
import type { EffectHandler } from '../actors/effect-executor.ts';
import type { FencedError } from '../actors/errors.ts';
import { createRuntimeMetrics } from '../actors/metrics.ts';
import { Ownership } from '../actors/ownership.ts';
import { reattachRuns } from '../actors/reattach.ts';
import type { Clock } from '../actors/ports.ts';
import { Supervisor } from '../actors/supervisor.ts';
import type { CompiledConfig } from './config/index.ts';
import { updateConcurrencyGroup } from './db/concurrency-groups.ts';
import { deleteInboxEvents, enqueueRunEvent, peekInbox } from './db/inbox.ts';
import { createRunStore } from './db/run-store.ts';
import type { Schema } from './db/schema.ts';

export interface RuntimeDeps {
  config: CompiledConfig;
  db: Kysely<Schema>;
  clock: Clock;
  log: Logger;
  registry: Registry;
  onFenced: (error: FencedError) => void;
}

function createRouter({ db, config, clock, log }: RuntimeDeps, supervisor: Supervisor): EventRouter {
  const inbox = {
    enqueue: (runId: string, event: unknown) => enqueueRunEvent(db, { runId, event, now: clock.now() }),
    peek: (limit: number) => peekInbox(db, { coordinatorId: config.coordinatorId, limit }),
    remove: (ids: number[]) => deleteInboxEvents(db, ids),
  };
  return new EventRouter(supervisor, inbox, clock, log.child({ component: 'router' }));
}

/** The actor runtime of one coordinator: supervisor, ownership, dispatcher, effect executor. */
export function createRuntime(deps: RuntimeDeps) {
  const { config, clock, log } = deps;
  const metrics = createRuntimeMetrics(deps.registry);
  // Read at every write: the epoch ownership holds right now (it changes only by re-claiming).
  const store = createRunStore(deps.db, { coordinatorId: config.coordinatorId, epoch: () => ownership.epoch }, clock);
  const handlers: Record<string, EffectHandler> = {};
  const executor = new EffectExecutor({ handlers, markDone: (ids) => store.markEffectsDone(ids), clock, log, metrics });
  const supervisor = new Supervisor({
    store,
    clock,
    log,
    metrics,
    maxBatch: config.commitMaxBatch,
    batching: config.commitBatching,
    executeEffects: (effects) => executor.execute(effects),
    onFenced: deps.onFenced,
  });
  const router = createRouter(deps, supervisor);
  const { db } = deps;
  const deliver = (runId: string, event: Parameters<EventRouter['deliver']>[1]) => router.deliver(runId, event);
  const registry = new AgentRegistry(() => clock.now());
  const dispatcher = new Dispatcher(registry, deliver, log.child({ component: 'dispatcher' }));
  supervisor.observe((update) => {
    if (['success', 'failed', 'cancelled'].includes(update.status)) dispatcher.forgetRun(update.runId);
  });
  const groups = new ConcurrencyGroups((key, change) => updateConcurrencyGroup(db, key, clock.now(), change), deliver, clock);
  handlers['requestPlacement'] = (effect) => dispatcher.requestPlacement(effect);
  handlers['requestConcurrency'] = (effect) => groups.request(effect);
  handlers['releaseConcurrency'] = (effect) => groups.release(effect);
  const ownership = new Ownership(supervisor, {
    ...{ coordinatorId: config.coordinatorId, renewMs: config.leaseRenewMs, ttlMs: config.leaseTtlMs },
    ...{ store, clock, metrics, log: log.child({ component: 'ownership' }) },
    onAdopted: (runIds) => {
      void reattachRuns({ supervisor, registry, dispatcher, deliver, log }, runIds).then(() => router.drain()).catch(() => undefined);
    },
    onFenced: (error) => {
      supervisor.stopAll();
      deps.onFenced(error);
    },
  });
  return {
    ...{ supervisor, router, dispatcher, registry, deliver, executor, ownership, handlers },
    async start() {
      await ownership.start();
      router.start();
    },
    stop() {
      router.stop();
      ownership.stop();
      supervisor.stopAll();
    },
  };
}

export type Runtime = ReturnType<typeof createRuntime>;
