import { Counter, Gauge, Histogram } from 'prom-client';
import type { Registry } from 'prom-client';

/** Runtime metrics (docs/http-api.md#metrics, runtime row), registered once per process. */
export function createRuntimeMetrics(registry: Registry) {
  const registers = [registry];
  return {
    actorsAlive: new Gauge({ name: 'switchyard_actors_alive', help: 'Run actors owned by this coordinator', registers }),
    actorEvents: new Counter({ name: 'switchyard_actor_events_total', help: 'Events accepted by run actors', registers }),
    commitSeconds: new Histogram({
      name: 'switchyard_commit_seconds',
      help: 'Duration of one group-commit transaction',
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1],
      registers,
    }),
    batchSize: new Histogram({
      name: 'switchyard_group_commit_batch_size',
      help: 'Entries per group-commit transaction',
      buckets: [1, 2, 4, 8, 16, 32, 64, 128, 256, 512],
      registers,
    }),
    timersArmed: new Gauge({ name: 'switchyard_timers_armed', help: 'Durable deadlines armed in memory', registers }),
    outboxPending: new Gauge({ name: 'switchyard_outbox_pending', help: 'Effects committed but not yet done', registers }),
    leasesHeld: new Gauge({ name: 'switchyard_leases_held', help: '1 while this coordinator holds its lease', registers }),
    takeovers: new Counter({ name: 'switchyard_lease_takeovers_total', help: 'Coordinators whose runs were adopted here, by why they counted as dead: lease (it ran out) or process (its liveness lock was free)', labelNames: ['why'] as const, registers }),
    adoptionSeconds: new Histogram({
      name: 'switchyard_adoption_seconds',
      help: 'Runs moved here until they are live (restored, reattached, deadlines armed): a takeover, or a restart reclaiming its own',
      labelNames: ['cause'] as const,
      buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30],
      registers,
    }),
    commitRetries: new Counter({
      name: 'switchyard_commit_retries_total',
      help: 'Group commits retried after a transient database error',
      registers,
    }),
    commitGiveUps: new Counter({
      name: 'switchyard_commit_give_ups_total',
      help: 'Runs whose writes were given up: outcome failed (stored as failed with a reason) or released (nothing stored)',
      labelNames: ['outcome'] as const,
      registers,
    }),
    dispatchPathStageSeconds: new Histogram({
      name: 'switchyard_dispatch_path_stage_seconds',
      help: "A webhook's way to its run's first job.dispatch, by stage (docs/architecture.md#where-a-deliverys-time-goes); stage total is the whole way",
      labelNames: ['stage'] as const,
      buckets: [0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1],
      registers,
    }),
    restoreFailures: new Counter({
      name: 'switchyard_restore_failures_total',
      help: 'Runs whose snapshot could not be restored',
      registers,
    }),
  };
}

export type RuntimeMetrics = ReturnType<typeof createRuntimeMetrics>;

/** Observes one stage of the dispatch path; each stage's child is made once (a delivery observes ~20 stages). */
export function dispatchStageObserver(metrics: RuntimeMetrics): (stage: string, seconds: number) => void {
  const children = new Map<string, { observe: (seconds: number) => void }>();
  return (stage, seconds) => {
    let child = children.get(stage);
    if (!child) children.set(stage, (child = metrics.dispatchPathStageSeconds.labels({ stage })));
    child.observe(seconds);
  };
}
