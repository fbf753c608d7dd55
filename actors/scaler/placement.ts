import type { Candidate } from '../../machines/scaler.machine.ts';
import type { AgentRequirements } from '../../machines/types.ts';
import type { LabelSet } from './ports.ts';
import { agentCanTake, labelsFit, pickAgent } from '../agents/match.ts';
import type { AgentRegistry, AgentSession } from '../agents/registry.ts';

/** What candidate selection needs of a backend. */
export interface BackendLabels {
  name: string;
  labelSets: readonly LabelSet[];
}

/**
 * SCL-2: the backend label sets whose agents could take the job — the same label, exclusion,
 * taint and run-step rules as a connected agent (docs/protocol.md#labels-executors-and-matching), applied to the labels the
 * spawned agent will register with. Order: backends as configured, then label sets.
 */
export function candidatesFor(requirements: AgentRequirements, backends: readonly BackendLabels[]): Candidate[] {
  const out: Candidate[] = [];
  for (const backend of backends) {
    backend.labelSets.forEach((set, labelSet) => {
      const offer = { agentId: '', labels: set.labels, taints: set.mandatoryLabels, properties: set.properties };
      if (agentCanTake(requirements, offer)) out.push({ backend: backend.name, labelSet });
    });
  }
  return out;
}

/** Backends with a label set that fits the job's labels but whose agent cannot execute its steps. */
export function wrongExecutorBackends(requirements: AgentRequirements, backends: readonly BackendLabels[]): string[] {
  const fits = (set: LabelSet) => labelsFit(requirements, { agentId: '', labels: set.labels, taints: set.mandatoryLabels, properties: set.properties });
  return backends.filter((backend) => backend.labelSets.some(fits)).map((backend) => backend.name);
}

/**
 * The registry's `find`, except that an agent a scaler spawned for another job (or that already
 * served its one job) is not offered: a spawn serves its bound job only (SCL-3, SCL-7).
 */
export function findHonouringScaler(
  registry: AgentRegistry,
  requirements: AgentRequirements,
  unavailable: (session: AgentSession) => boolean,
): { session: AgentSession } | { none: 'no_matching_agent' | 'capacity'; matching: number } {
  const matching = registry.all().filter((session) => agentCanTake(requirements, session));
  const free = matching.filter((s) => s.unusable === null && s.slots.size < s.maxConcurrency && !unavailable(s));
  const session = pickAgent(requirements, free);
  if (session) return { session };
  return { none: matching.length === 0 ? 'no_matching_agent' : 'capacity', matching: matching.length };
}
