import { Counter, Gauge } from 'prom-client';
import type { Registry } from 'prom-client';

/** Scaler metrics (SCL-9; docs/http-api.md#metrics, docs/requirements.md), registered once per coordinator. */
export function createScalerMetrics(registry: Registry) {
  const registers = [registry];
  return {
    spawns: new Counter({ name: 'switchyard_scaler_spawns_total', help: 'Agents a scaler started', labelNames: ['backend', 'bound'], registers }),
    spawnFailures: new Counter({
      name: 'switchyard_scaler_spawn_failures_total',
      help: 'Spawns that failed, timed out or ended before registering',
      labelNames: ['backend', 'bound'],
      registers,
    }),
    refusals: new Counter({
      name: 'switchyard_scaler_spawn_refusals_total',
      help: 'Requests for an agent refused: caps reached, or no backend serves the labels',
      labelNames: ['reason'],
      registers,
    }),
    agents: new Gauge({ name: 'switchyard_scaler_agents', help: 'Scaler agents by backend and state', labelNames: ['backend', 'state'], registers }),
    cpusReserved: new Gauge({ name: 'switchyard_scaler_cpus_reserved', help: 'CPUs reserved by scaler agents (every record until its destroy completes)', labelNames: ['backend'], registers }),
    memoryReserved: new Gauge({ name: 'switchyard_scaler_memory_bytes_reserved', help: 'Memory reserved by scaler agents', labelNames: ['backend'], registers }),
  };
}

export type ScalerMetrics = ReturnType<typeof createScalerMetrics>;
