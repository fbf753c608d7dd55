import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import { coerceError } from '../../lib/errors.ts';
import { finishDelivery, loadDelivery, retryDelivery } from '../db/deliveries.ts';
import type { Schema } from '../db/schema.ts';
import { MAX_INTAKE_ATTEMPTS, TransientDeliveryError, retryDelayMs } from '../queue/delivery-queue.ts';
import type { DeliveryProcessor } from '../queue/delivery-queue.ts';
import { runPipeline } from './pipeline.ts';
import type { PipelineDeps, PipelineResult } from './pipeline.ts';

export interface DeliveryProcessorDeps {
  db: Kysely<Schema>;
  pipeline: PipelineDeps;
  now: () => number;
  log: Logger;
  onProcessed?: (result: PipelineResult | 'retry' | 'dead') => void;
}

/**
 * Runs a claimed delivery through the pipeline and records its outcome (INT-5..7). A failure is
 * retried with backoff (5 s doubling, 10 min cap) and the delivery is dead after 10 attempts.
 */
export function createDeliveryProcessor(deps: DeliveryProcessorDeps): DeliveryProcessor {
  return async (key, worker) => {
    const delivery = await loadDelivery(deps.db, key);
    if (!delivery) return 'done';
    const log = deps.log.child({ source: key.source, deliveryId: key.deliveryId, event: delivery.eventName });
    try {
      const result = await runPipeline(deps.pipeline, delivery);
      await finishDelivery(deps.db, { ...key, worker, status: result.status, outcome: result.outcome, now: deps.now() });
      log.info({ status: result.status, ...result.outcome }, 'delivery processed');
      deps.onProcessed?.(result);
      return 'done';
    } catch (thrown) {
      const error = coerceError(thrown);
      const attempt = delivery.attempts + 1;
      const transient = error instanceof TransientDeliveryError;
      if (attempt >= MAX_INTAKE_ATTEMPTS) {
        await retryDelivery(deps.db, { ...key, worker, error: error.message, nextAttemptAt: null });
        log.error({ err: error, attempt }, 'delivery is dead after its last attempt; retry it through the API');
        deps.onProcessed?.('dead');
        return 'dead';
      }
      const retryAt = deps.now() + retryDelayMs(attempt);
      await retryDelivery(deps.db, { ...key, worker, error: error.message, nextAttemptAt: retryAt });
      log.warn({ err: transient ? undefined : error, reason: error.message, attempt, retryAt }, 'delivery will be retried');
      deps.onProcessed?.('retry');
      return { retryAt };
    }
  };
}
