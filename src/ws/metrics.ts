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
    ownershipViolations: new Counter({
      name: 'switchyard_ws_ownership_violations_total',
      help: 'Job messages from an agent that does not own the attempt (dropped)',
      registers,
    }),
  };
}
