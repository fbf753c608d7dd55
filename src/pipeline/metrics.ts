import { Counter, Gauge, Histogram } from 'prom-client';
import type { Registry } from 'prom-client';
import type { LockFileCache } from '../lockfile/cache.ts';
import type { DeliveryProcessorDeps } from './deliveries.ts';

type Processed = Parameters<NonNullable<DeliveryProcessorDeps['onProcessed']>>[0];

export interface IntakeMetricSources {
  /** The lock-file cache whose hits are exported. */
  cache: LockFileCache;
  /** Deliveries given up on, read at each scrape. */
  deadDeliveries: () => Promise<number>;
}

/** Intake and lock-file metrics: deliveries received, processed and dead, lock-file fetches and cache hits, trigger matching. */
export function createIntakeMetrics(registry: Registry, sources: IntakeMetricSources) {
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
  new Gauge({
    name: 'switchyard_deliveries_dead',
    help: 'Deliveries given up on after their retries; POST /api/v1/deliveries/:source/:id/retry runs one again',
    registers,
    async collect() {
      this.set(await sources.deadDeliveries());
    },
  });
  const lockFetches = new Counter({ name: 'switchyard_lockfile_fetch_total', help: 'Lock-file resolutions by outcome', labelNames: ['outcome'], registers });
  for (const outcome of ['found', 'miss', 'corrupt', 'absent', 'invalid', 'transient']) lockFetches.inc({ outcome }, 0);
  let hitsSeen = 0;
  new Counter({
    name: 'switchyard_lockfile_cache_hits_total',
    help: 'Lock files served from the in-memory cache (by provider and commit)',
    registers,
    collect() {
      this.inc(sources.cache.hits - hitsSeen);
      hitsSeen = sources.cache.hits;
    },
  });
  const triggerMatch = new Histogram({
    name: 'switchyard_trigger_match_seconds',
    help: "Time to match a lock file's triggers against one event",
    buckets: [0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1],
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
    lockFile: (outcome: string) => lockFetches.inc({ outcome }),
    triggersMatched: (seconds: number) => triggerMatch.observe(seconds),
  };
}
