import { Queue, Worker } from 'bullmq';
import type { Job } from 'bullmq';
import { Redis } from 'ioredis';
import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import { coerceError } from '../../lib/errors.ts';
import { claimDelivery, countDueDeliveries, listDueDeliveries } from '../db/deliveries.ts';
import type { DeliveryKey } from '../db/deliveries.ts';
import type { Schema } from '../db/schema.ts';
import { INTAKE_LEASE_MS } from './embedded-queue.ts';
import type { DeliveryProcessor, DeliveryQueue } from './delivery-queue.ts';

const SWEEP_MS = 5_000;

export interface BullMqOptions {
  redisUrl: string;
  queueName?: string;
  db: Kysely<Schema>;
  process: DeliveryProcessor;
  worker: string;
  now: () => number;
  log: Logger;
  concurrency?: number;
}

/** BullMQ job ids may not contain ':'; this one is deterministic per delivery and attempt. */
export function jobIdOf(key: DeliveryKey, attempt = 0): string {
  return `${Buffer.from(`${key.source}\u0000${key.deliveryId}`).toString('base64url')}.${attempt}`;
}

/**
 * Intake through BullMQ on Redis, shared by every coordinator. The deliveries table stays the
 * record of truth: a worker claims the row before processing it, and a periodic sweep re-enqueues
 * anything due that never reached Redis (a crash between the commit and the add).
 */
export class BullMqDeliveryQueue implements DeliveryQueue {
  readonly kind = 'bullmq' as const;
  private queue: Queue | null = null;
  private worker: Worker | null = null;
  private sweepTimer: NodeJS.Timeout | null = null;
  private readonly connections: Redis[] = [];

  constructor(private readonly options: BullMqOptions) {}

  private connect(): Redis {
    const redis = new Redis(this.options.redisUrl, { maxRetriesPerRequest: null });
    redis.on('error', (error) => this.options.log.warn({ err: error }, 'redis connection error'));
    this.connections.push(redis);
    return redis;
  }

  async start(): Promise<void> {
    const name = this.options.queueName ?? 'switchyard-intake';
    this.queue = new Queue(name, { connection: this.connect() });
    this.worker = new Worker(name, (job: Job<DeliveryKey>) => this.run(job), {
      connection: this.connect(),
      concurrency: this.options.concurrency ?? 4,
    });
    this.worker.on('failed', (job, error) => this.options.log.error({ err: error, jobId: job?.id }, 'intake job failed'));
    await this.queue.waitUntilReady();
    await this.sweep();
  }

  notify(key: DeliveryKey): void {
    void this.add(key, 0, 0);
  }

  async stop(): Promise<void> {
    if (this.sweepTimer) clearTimeout(this.sweepTimer);
    await this.worker?.close();
    await this.queue?.close();
    for (const redis of this.connections.splice(0)) redis.disconnect();
  }

  async idle(): Promise<void> {
    for (;;) {
      const counts = await this.queue?.getJobCounts('active', 'waiting', 'prioritized');
      const busy = Object.values(counts ?? {}).reduce((a, b) => a + b, 0);
      if (busy === 0 && (await countDueDeliveries(this.options.db, this.options.now())) === 0) return;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }

  private async add(key: DeliveryKey, attempt: number, delay: number): Promise<void> {
    try {
      const opts = { jobId: jobIdOf(key, attempt), delay, removeOnComplete: true, removeOnFail: 1000 };
      await this.queue?.add('delivery', { source: key.source, deliveryId: key.deliveryId }, opts);
    } catch (thrown) {
      this.options.log.warn({ err: coerceError(thrown), ...key }, 'could not enqueue delivery; the sweep will retry');
    }
  }

  private async run(job: Job<DeliveryKey>): Promise<void> {
    const key = { source: job.data.source, deliveryId: job.data.deliveryId };
    const { db, worker, now } = this.options;
    if (!(await claimDelivery(db, { ...key, worker, now: now(), leaseMs: INTAKE_LEASE_MS }))) return;
    const result = await this.options.process(key, worker);
    if (typeof result === 'object') {
      const attempt = Number(String(job.id).split('.').pop() ?? 0) + 1;
      await this.add(key, attempt, Math.max(0, result.retryAt - now()));
    }
  }

  /** Deliveries due in the table that Redis may not know about (INT-5, B3). */
  private async sweep(): Promise<void> {
    try {
      const due = await listDueDeliveries(this.options.db, { now: this.options.now(), limit: 500 });
      for (const row of due) await this.add(row, row.attempts, 0);
    } catch (thrown) {
      this.options.log.warn({ err: coerceError(thrown) }, 'intake sweep failed');
    } finally {
      this.sweepTimer = setTimeout(() => void this.sweep(), SWEEP_MS);
    }
  }
}
