import { Counter, Gauge } from 'prom-client';
import type { Registry } from 'prom-client';
import type { AgentRegistry } from '../../actors/agents/registry.ts';
import { OWNERSHIP_CAUSES } from './job-messages.ts';
import type { OwnershipCause } from './job-messages.ts';
import { AgentMetricsExport } from './agent-metrics-export.ts';
import type { ReportedMetric } from './agent-metrics-export.ts';

/** Agent-side metrics of docs/http-api.md#metrics. */
export function createAgentMetrics(registry: Registry, agents: AgentRegistry) {
  const registers = [registry];
  const reported = new AgentMetricsExport(registry);
  agents.observeSessions({ added: () => undefined, removed: (session) => reported.forget(session.agentId) });
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
        this.set(agents.size);
      },
    }),
    slots: new Gauge({
      name: 'switchyard_agent_slots',
      help: 'Job slots of the agents connected here: used, free (offered), or unusable (agent silent, draining or reclaiming)',
      labelNames: ['state'],
      registers,
      collect() {
        this.reset();
        const counts = { used: 0, free: 0, unusable: 0 };
        for (const session of agents.all()) {
          counts.used += session.slots.size;
          counts[session.unusable === null ? 'free' : 'unusable'] += Math.max(0, session.maxConcurrency - session.slots.size);
        }
        for (const [state, count] of Object.entries(counts)) this.set({ state }, count);
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
    /** The agents' own metrics (`agent.metrics`), re-exported as `switchyard_agent_*`. */
    reported,
    logBytes: new Counter({ name: 'switchyard_log_bytes_stored_total', help: 'Bytes of job log lines stored', registers }),
  };
}

/** The counting callbacks of an agent connection, bound to these metrics. */
export function connectionCounters(metrics: ReturnType<typeof createAgentMetrics>) {
  return {
    onAgentMetrics: (agentId: string, reported: readonly ReportedMetric[]) => metrics.reported.record(agentId, reported),
    onLogBytesStored: (bytes: number) => metrics.logBytes.inc(bytes),
    onUnknownType: (type: string) => metrics.unknownMessages.inc({ type: type.slice(0, 64) }),
    onInvalidInformational: (type: string) => metrics.invalidInformational.inc({ type: type.slice(0, 64) }),
    onViolation: (cause: OwnershipCause) => metrics.ownershipViolations.inc({ cause }),
  };
}
