import { expandTemplate, replaceTemplate } from './run.expand.ts';
import { applyDecisions, evaluateGraph } from './run.graph.ts';
import type { FanoutGroup, GateDecision, JobPlan, RunJobNode } from './run.types.ts';

/** What one evaluation of the run's graph decided. */
export interface Settlement {
  /** Decisions for jobs with an actor, in order (templates have none to tell). */
  decisions: GateDecision[];
  /** Children of dynamic-matrix templates, to be spawned before the decisions are sent. */
  spawned: JobPlan[];
  /** Templates that were fanned out and leave the run's template list. */
  expanded: string[];
}

/**
 * Evaluates the graph until nothing more changes: a template that fans out, is skipped or fails
 * changes the graph without any job reporting, so its downstreams are decided in the same step.
 * Updates `jobs` and `groups` in place; pure otherwise.
 */
export function settle(
  jobs: Record<string, RunJobNode>,
  groups: Record<string, FanoutGroup>,
  templates: Readonly<Record<string, JobPlan>>,
  first: readonly GateDecision[] = [],
): Settlement {
  const settlement: Settlement = { decisions: [], spawned: [], expanded: [] };
  applyDecisions(jobs, first);
  settlement.decisions.push(...first);
  // Each pass that changes the graph decides at least one more job for good, so this ends.
  for (let pass = 0; pass <= Object.keys(jobs).length + 1; pass++) {
    const decisions = evaluateGraph(jobs, groups).flatMap((decision) => expandOrKeep(decision, jobs, groups, templates, settlement));
    applyDecisions(jobs, decisions);
    const templateEnded = decisions.some((d) => jobs[d.jobKey]?.template === true && d.kind !== 'gate');
    settlement.decisions.push(...decisions.filter((d) => jobs[d.jobKey]?.template !== true));
    if (!templateEnded && !decisions.some((d) => d.kind === 'expand')) break;
  }
  settlement.decisions = settlement.decisions.filter((d) => d.kind !== 'expand');
  return settlement;
}

/** An `expand` fans the template out (and stays in the list to mark the change), or becomes its failure. */
function expandOrKeep(
  decision: GateDecision,
  jobs: Record<string, RunJobNode>,
  groups: Record<string, FanoutGroup>,
  templates: Readonly<Record<string, JobPlan>>,
  settlement: Settlement,
): GateDecision[] {
  if (decision.kind !== 'expand') return [decision];
  const template = templates[decision.jobKey];
  if (!template) return [];
  const expansion = expandTemplate(template, decision.init);
  if (!expansion.ok) return [{ jobKey: decision.jobKey, kind: 'fail', failure: expansion.failure }];
  replaceTemplate(jobs, groups, decision.jobKey, expansion.plans);
  settlement.spawned.push(...expansion.plans);
  settlement.expanded.push(decision.jobKey);
  return [decision];
}
