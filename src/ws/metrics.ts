import { Counter, Gauge } from 'prom-client';
import type { Registry } from 'prom-client';
import { OWNERSHIP_CAUSES } from './job-messages.ts';
import type { OwnershipCause } from './job-messages.ts';

/** Agent-side metrics of orchestration.md §18. */
export function createAgentMetrics(registry: Registry, connectedCount: () => number) {
  const registers = [registry];
  const ownershipViolations = new Counter({
    name: 'switchyard_ws_ownership_violations_total',
    help: 'Job messages refused by the ownership rule, by cause: other_agent (counts towards a 4003), ended or unknown (an agent replaying its own old attempts; dropped quietly)',
    labelNames: ['cause'],
    registers,
  });
  // Every cause is exported from the start, so a zero reads as a zero and not as a missing series.
  for (const cause of OWNERSHIP_CAUSES) ownershipViolations.inc({ cause }, 0);
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
    ownershipViolations,
  };
}

/** The counting callbacks of an agent connection, bound to these metrics. */
export function connectionCounters(metrics: ReturnType<typeof createAgentMetrics>) {
  return {
    onUnknownType: (type: string) => metrics.unknownMessages.inc({ type: type.slice(0, 64) }),
    onInvalidInformational: (type: string) => metrics.invalidInformational.inc({ type: type.slice(0, 64) }),
    onViolation: (cause: OwnershipCause) => metrics.ownershipViolations.inc({ cause }),
  };
}
