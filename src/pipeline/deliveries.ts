import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import { coerceError } from '../../lib/errors.ts';
import { Batcher } from '../../lib/batcher.ts';
import { finishDeliveries, loadDelivery, retryDelivery, type DeliveryOutcome } from '../db/deliveries.ts';
import type { Schema } from '../db/schema.ts';
import { MAX_INTAKE_ATTEMPTS, PermanentDeliveryError, TransientDeliveryError, isRecorded, retryDelayMs } from '../queue/delivery-queue.ts';
import type { DeliveryProcessor } from '../queue/delivery-queue.ts';
import type { DeliveryKey } from '../db/deliveries.ts';
import { runPipeline } from './pipeline.ts';
import type { PipelineDeps, PipelineResult } from './pipeline.ts';

/** Delivery outcomes written by one statement at most. */
const MAX_OUTCOME_BATCH = 200;

export interface DeliveryProcessorDeps {
  db: Kysely<Schema>;
  pipeline: PipelineDeps;
  now: () => number;
  log: Logger;
  onProcessed?: (result: PipelineResult | 'retry' | 'dead') => void;
}

/**
 * Runs a claimed delivery through the pipeline and records its outcome (INT-5..7). A failure is
 * retried with backoff (5 s doubling, 10 min cap) and the delivery is dead after 10 attempts, or
 * fewer when the error bounds them; a PermanentDeliveryError makes it dead at once.
 */
export function createDeliveryProcessor(deps: DeliveryProcessorDeps): DeliveryProcessor {
  // The outcomes of deliveries processed together are written together, one UPDATE a batch.
  const outcomes = new Batcher<DeliveryOutcome>(async (batch) => {
    await finishDeliveries(deps.db, batch);
    return batch.map(() => undefined);
  }, MAX_OUTCOME_BATCH);
  return async (key, worker, loaded) => {
    const delivery = loaded ?? (await loadDelivery(deps.db, key));
    if (!delivery) return 'done';
    delivery.trace?.mark('intake.handed-over');
    const log = deps.log.child({ source: key.source, deliveryId: key.deliveryId, event: delivery.eventName });
    try {
      const result = await runPipeline(deps.pipeline, delivery);
      if (!(await isRecorded(delivery))) return notRecorded(log);
      await outcomes.add({ ...key, worker, status: result.status, outcome: result.outcome, now: deps.now() });
      log.info({ status: result.status, ...result.outcome }, 'delivery processed');
      deps.onProcessed?.(result);
      return 'done';
    } catch (thrown) {
      if (!(await isRecorded(delivery))) return notRecorded(log);
      return failed(deps, { key, worker, log, attempt: delivery.attempts + 1 }, coerceError(thrown));
    }
  };
}

/** A delivery handed over while it was recorded, whose row was not stored: nothing was written for it, nothing is. */
function notRecorded(log: Logger): 'done' {
  log.debug('delivery not recorded (a duplicate, or its INSERT failed); its processing stopped');
  return 'done';
}

interface Attempt {
  key: DeliveryKey;
  worker: string;
  log: Logger;
  attempt: number;
}

/** Records a failed attempt: dead when permanent or out of attempts, else retried later. */
async function failed(deps: DeliveryProcessorDeps, { key, worker, log, attempt }: Attempt, error: Error): Promise<'dead' | { retryAt: number }> {
  const permanent = error instanceof PermanentDeliveryError;
  const transient = error instanceof TransientDeliveryError;
  // Expected failures carry their reason; anything else is logged with its stack.
  const fields = { err: transient || permanent ? undefined : error, reason: error.message, attempt };
  if (permanent || attempt >= (transient ? error.maxAttempts : MAX_INTAKE_ATTEMPTS)) {
    await retryDelivery(deps.db, { ...key, worker, error: error.message, nextAttemptAt: null });
    if (permanent) log.warn(fields, 'delivery is dead: it cannot succeed as it is');
    else log.error(fields, 'delivery is dead after its last attempt; retry it through the API');
    deps.onProcessed?.('dead');
    return 'dead';
  }
  const retryAt = deps.now() + retryDelayMs(attempt);
  await retryDelivery(deps.db, { ...key, worker, error: error.message, nextAttemptAt: retryAt });
  log.warn({ ...fields, retryAt }, 'delivery will be retried');
  deps.onProcessed?.('retry');
  return { retryAt };
}
