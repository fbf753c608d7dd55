import type { AgentRequirements, LabelMatcher, StepExecutor } from '../../machines/types.ts';

/** What matching needs to know about a connected agent (docs/protocol.md#labels-executors-and-matching). */
export interface AgentOffer {
  agentId: string;
  labels: readonly string[];
  /** The token's mandatory labels: the agent only takes jobs that require every one of them. */
  taints: readonly string[];
  properties: Readonly<Record<string, string | number | boolean>>;
}

/** The reference agent declares it executes `run:` steps (docs/protocol.md#labels-executors-and-matching). */
export const RUN_STEPS_PROPERTY = 'switchyard.runSteps';
/** Declared by an agent that executes both kinds; without it, a run-steps agent runs no TypeScript. */
export const TYPESCRIPT_STEPS_PROPERTY = 'switchyard.typescriptSteps';

/**
 * Whether an agent can execute a job's steps. An agent that does not declare run steps is taken
 * for a KiCI agent: the stock agent announces itself only by `version` and its `kici:role:*` labels.
 */
export function canExecute(executor: StepExecutor, properties: AgentOffer['properties']): boolean {
  const runSteps = properties[RUN_STEPS_PROPERTY] === true;
  switch (executor) {
    case 'any':
      return true;
    case 'run-steps':
      return runSteps;
    case 'kici':
      return !runSteps || properties[TYPESCRIPT_STEPS_PROPERTY] === true;
  }
}

function matches(matcher: LabelMatcher, label: string): boolean {
  if (matcher.kind === 'exact') return matcher.value === label;
  try {
    return new RegExp(matcher.source, matcher.flags).test(label);
  } catch {
    // A matcher that does not compile was refused when the lock file was read; here it matches nothing.
    return false;
  }
}

/** The exact labels a job requires; taints are satisfied only by these. */
function requiredLabels(requirements: AgentRequirements): Set<string> {
  return new Set(requirements.runsOn.flatMap((m) => (m.kind === 'exact' ? [m.value] : [])));
}

/** Label, exclusion, taint and run-step rules of docs/protocol.md#labels-executors-and-matching (slots are checked elsewhere). */
export function agentCanTake(requirements: AgentRequirements, agent: AgentOffer): boolean {
  if (!requirements.runsOn.every((matcher) => agent.labels.some((label) => matches(matcher, label)))) return false;
  if (requirements.excludeLabels.some((matcher) => agent.labels.some((label) => matches(matcher, label)))) return false;
  if (agent.taints.length > 0) {
    const required = requiredLabels(requirements);
    if (!agent.taints.every((taint) => required.has(taint))) return false;
  }
  return canExecute(requirements.executor, agent.properties);
}

/** The label, exclusion and taint rules alone: the agent could take the job if it could execute its steps. */
export function labelsFit(requirements: AgentRequirements, agent: AgentOffer): boolean {
  return agentCanTake({ ...requirements, executor: 'any' }, agent);
}

/** `deterministic` picks the lowest agentId; `any` the first free one in arrival order. */
export function pickAgent<T extends AgentOffer>(requirements: AgentRequirements, free: readonly T[]): T | undefined {
  if (free.length === 0) return undefined;
  if (requirements.runsOnPick === 'any') return free[0];
  return [...free].sort((a, b) => a.agentId.localeCompare(b.agentId))[0];
}
