import { Counter, Histogram } from 'prom-client';
import type { Registry } from 'prom-client';
import type { DeliveryProcessorDeps } from './deliveries.ts';

type Processed = Parameters<NonNullable<DeliveryProcessorDeps['onProcessed']>>[0];

/** Webhook deliveries received and processed, duplicates, and the time to the durable 202. */
export function createIntakeMetrics(registry: Registry) {
  const registers = [registry];
  const received = new Counter({ name: 'switchyard_webhooks_received_total', help: 'Webhook deliveries received', labelNames: ['source', 'outcome'], registers });
  const processed = new Counter({ name: 'switchyard_webhooks_processed_total', help: 'Deliveries processed', labelNames: ['result'], registers });
  const dedup = new Counter({ name: 'switchyard_webhook_dedup_hits_total', help: 'Duplicate deliveries answered 200', registers });
  const accept = new Histogram({
    name: 'switchyard_webhook_accept_seconds',
    help: 'Time from request to the durable 202',
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5],
    registers,
  });
  const observe = (source: string, outcome: 'accepted' | 'duplicate' | 'rejected', seconds: number): void => {
    received.inc({ source: source.startsWith('generic:') ? 'generic' : source, outcome });
    if (outcome === 'duplicate') dedup.inc();
    if (outcome === 'accepted') accept.observe(seconds);
  };
  return {
    observe,
    processed: (result: Processed) => processed.inc({ result: typeof result === 'string' ? result : result.status }),
  };
}
