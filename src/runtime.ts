import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import { Dispatcher } from '../actors/dispatcher.ts';
import { EffectExecutor } from '../actors/effect-executor.ts';
import type { EffectHandler } from '../actors/effect-executor.ts';
import type { FencedError } from '../actors/errors.ts';
import { createRuntimeMetrics } from '../actors/metrics.ts';
import { Ownership } from '../actors/ownership.ts';
import type { Clock } from '../actors/ports.ts';
import { Supervisor } from '../actors/supervisor.ts';
import type { CompiledConfig } from './config/index.ts';
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
  const dispatcher = new Dispatcher((runId, event) => supervisor.send(runId, event), log.child({ component: 'dispatcher' }));
  handlers['requestPlacement'] = (effect) => dispatcher.requestPlacement(effect);
  const ownership = new Ownership(supervisor, {
    coordinatorId: config.coordinatorId,
    renewMs: config.leaseRenewMs,
    ttlMs: config.leaseTtlMs,
    store,
    clock,
    log: log.child({ component: 'ownership' }),
    metrics,
    onAdopted: () => {},
    onFenced: (error) => {
      supervisor.stopAll();
      deps.onFenced(error);
    },
  });
  return {
    supervisor,
    dispatcher,
    executor,
    ownership,
    handlers,
    start: () => ownership.start(),
    stop() {
      ownership.stop();
      supervisor.stopAll();
    },
  };
}

export type Runtime = ReturnType<typeof createRuntime>;
