import { Counter, Gauge } from 'prom-client';
import type { Registry } from 'prom-client';

/** Agent-side metrics of orchestration.md §18. */
export function createAgentMetrics(registry: Registry, connectedCount: () => number) {
  const registers = [registry];
  return {
    connected: new Gauge({
      name: 'switchyard_agents_connected',
      help: 'Registered agent sessions on this coordinator',
      registers,
      collect() {
        this.set(connectedCount());
      },
    }),
    unknownMessages: new Counter({
      name: 'switchyard_ws_unknown_messages_total',
      help: 'Agent frames with a type protocol v1 does not know (ignored)',
      labelNames: ['type'],
      registers,
    }),
    invalidInformational: new Counter({
      name: 'switchyard_ws_invalid_informational_total',
      help: 'Informational agent frames that failed their schema (logged and ignored; the socket stays open)',
      labelNames: ['type'],
      registers,
    }),
    ownershipViolations: new Counter({
      name: 'switchyard_ws_ownership_violations_total',
      help: 'Job messages from an agent that does not own the attempt (dropped)',
      registers,
    }),
  };
}

/** The counting callbacks of an agent connection, bound to these metrics. */
export function connectionCounters(metrics: ReturnType<typeof createAgentMetrics>) {
  return {
    onUnknownType: (type: string) => metrics.unknownMessages.inc({ type: type.slice(0, 64) }),
    onInvalidInformational: (type: string) => metrics.invalidInformational.inc({ type: type.slice(0, 64) }),
    onViolation: () => metrics.ownershipViolations.inc(),
  };
}
