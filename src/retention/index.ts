import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import type { BlobStore } from '../blobs/blob-store.ts';
import type { CompiledConfig } from '../config/index.ts';
import type { Schema } from '../db/schema.ts';
import { RunArchives } from './archive.ts';
import { RunHistory } from './run-history.ts';
import { RetentionSchedule } from './schedule.ts';

export interface Retention {
  history: RunHistory;
  schedule: RetentionSchedule;
}

/** Run archives in the coordinator's blob store, the history reader over them, and the retention job. */
export function createRetention(deps: { config: CompiledConfig; db: Kysely<Schema>; now: () => number; log: Logger; registry: Registry; store: BlobStore }): Retention {
  const { config, db, now, log, registry } = deps;
  const archives = new RunArchives(deps.store);
  const schedule = new RetentionSchedule({
    ...{ db, archives, now, log: log.child({ component: 'retention' }), coordinatorId: config.coordinatorId, registry },
    ...{ runsOlderThanMs: config.retentionRunsMs, deliveriesOlderThanMs: config.retentionDeliveriesMs, intervalMs: config.retentionIntervalMs },
  });
  return { history: new RunHistory(db, archives), schedule };
}
