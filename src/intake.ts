import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import { Counter, Histogram } from 'prom-client';
import type { Registry } from 'prom-client';
import type { NewRun } from '../actors/runs/ports.ts';
import type { CompiledConfig } from './config/index.ts';
import { jobTimeoutsOf } from './config/timeouts.ts';
import { getRepository } from './db/repositories.ts';
import type { Schema } from './db/schema.ts';
import type { WebhookDeps } from './http/webhooks.ts';
import { LockFileCache } from './lockfile/cache.ts';
import { createDeliveryProcessor } from './pipeline/deliveries.ts';
import { createRunStarter } from './pipeline/start-runs.ts';
import { BullMqDeliveryQueue } from './queue/bullmq-queue.ts';
import { EmbeddedDeliveryQueue } from './queue/embedded-queue.ts';
import type { DeliveryQueue } from './queue/delivery-queue.ts';
import { IsolatedVmSandbox } from './sandbox/index.ts';
import { genericSourceRepository } from './db/generic-sources.ts';

export interface IntakeWiring {
  db: Kysely<Schema>;
  config: CompiledConfig;
  registry: Registry;
  createRun: (run: NewRun) => Promise<void>;
  now: () => number;
  log: Logger;
}

function intakeMetrics(registry: Registry) {
  const registers = [registry];
  return {
    received: new Counter({ name: 'switchyard_webhooks_received_total', help: 'Webhook deliveries received', labelNames: ['source', 'outcome'], registers }),
    processed: new Counter({ name: 'switchyard_webhooks_processed_total', help: 'Deliveries processed', labelNames: ['result'], registers }),
    dedup: new Counter({ name: 'switchyard_webhook_dedup_hits_total', help: 'Duplicate deliveries answered 200', registers }),
    accept: new Histogram({
      name: 'switchyard_webhook_accept_seconds',
      help: 'Time from request to the durable 202',
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5],
      registers,
    }),
  };
}

/** Webhook intake: durable deliveries, the intake queue (embedded or BullMQ) and the pipeline behind it. */
export function createIntake(wiring: IntakeWiring) {
  const { db, config, now, log } = wiring;
  const metrics = intakeMetrics(wiring.registry);
  const sandbox = new IsolatedVmSandbox({ timeoutMs: 100, memoryLimitMb: 32 });
  const startRuns = createRunStarter({
    ...{ db, createRun: wiring.createRun, sandbox, timeouts: jobTimeoutsOf(config), maxAttempts: config.maxDispatchAttempts, now },
    log: log.child({ component: 'pipeline' }),
  });
  const process = createDeliveryProcessor({
    db,
    now,
    log: log.child({ component: 'intake' }),
    pipeline: { repository: (name) => getRepository(db, name), genericSourceRepository: (source) => genericSourceRepository(db, source), cache: new LockFileCache({ now }), startRuns, log },
    onProcessed: (result) => metrics.processed.inc({ result: typeof result === 'string' ? result : result.status }),
  });
  const worker = config.coordinatorId;
  const queue: DeliveryQueue = config.redisUrl
    ? new BullMqDeliveryQueue({ redisUrl: config.redisUrl, db, process, worker, now, log: log.child({ component: 'bullmq' }) })
    : new EmbeddedDeliveryQueue(db, process, worker, now, log.child({ component: 'intake-queue' }));
  const webhooks: WebhookDeps = {
    db,
    githubSecrets: config.githubWebhookSecrets,
    now,
    log,
    onAccepted: (key) => queue.notify(key),
    observe: (source, outcome, seconds) => {
      metrics.received.inc({ source: source.startsWith('generic:') ? 'generic' : source, outcome });
      if (outcome === 'duplicate') metrics.dedup.inc();
      if (outcome === 'accepted') metrics.accept.observe(seconds);
    },
  };
  return {
    queue,
    webhooks,
    async stop() {
      await queue.stop();
      sandbox.dispose();
    },
  };
}
