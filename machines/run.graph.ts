import { aggregateStatus } from './status.ts';
import type { TerminalJobStatus } from './status.ts';
import type { FanoutGroup, GateDecision, JobPlan, RunJobNode } from './run.types.ts';
import type { NeedEdge, WaitingReason } from './types.ts';

const APPROVAL_GATE: WaitingReason = { kind: 'approval', message: 'waiting for workflow approval' };

/**
 * The run's job graph at creation, and the gate each job starts behind: `null` for a job
 * that is eligible at once. Skips decided at creation are returned to be sent after spawn.
 */
export function buildGraph(plans: readonly JobPlan[], held: boolean) {
  const groups: Record<string, FanoutGroup> = {};
  const jobs: Record<string, RunJobNode> = {};
  for (const plan of plans) {
    const group = (groups[plan.baseName] ??= { children: [], maxParallel: plan.maxParallel, failFast: plan.failFast, halted: false });
    group.children.push(plan.key);
    const status = plan.initFailure ? 'failed' : null;
    jobs[plan.key] = { baseName: plan.baseName, fanoutIndex: plan.fanoutIndex, needs: plan.needs, status, decided: false, gate: null };
  }
  const decisions = held ? [] : evaluateGraph(jobs, groups);
  const initialGates: Record<string, WaitingReason | null> = {};
  for (const [key, node] of Object.entries(jobs)) {
    const decision = decisions.find((d) => d.jobKey === key);
    if (held) node.gate = APPROVAL_GATE;
    initialGates[key] = decision?.kind === 'release' ? null : decision?.kind === 'gate' ? decision.reason : (node.gate ?? NEEDS_GATE);
  }
  applyDecisions(jobs, decisions);
  return { jobs, groups, initialGates, skips: decisions.filter((d) => d.kind === 'skip') };
}

const NEEDS_GATE: WaitingReason = { kind: 'needs', message: 'waiting for upstream jobs' };

/** Updates nodes in place with the decisions just taken, so none is taken twice. */
export function applyDecisions(jobs: Record<string, RunJobNode>, decisions: readonly GateDecision[]): void {
  for (const decision of decisions) {
    const node = jobs[decision.jobKey];
    if (!node) continue;
    if (decision.kind === 'gate') node.gate = decision.reason;
    else {
      node.decided = true;
      node.gate = null;
    }
  }
}

/** Status of a needed base name: the aggregate of its children once all are terminal (DAG-3). */
function upstreamStatus(name: string, jobs: Record<string, RunJobNode>, groups: Record<string, FanoutGroup>) {
  const children = groups[name]?.children ?? [];
  const statuses: TerminalJobStatus[] = [];
  for (const key of children) {
    const status = jobs[key]?.status;
    if (!status) return null;
    statuses.push(status);
  }
  return aggregateStatus(statuses);
}

type NeedsOutcome = { skip: string } | { open: string[] };

function needsDecision(node: RunJobNode, jobs: Record<string, RunJobNode>, groups: Record<string, FanoutGroup>): NeedsOutcome {
  const open: string[] = [];
  for (const edge of node.needs) {
    const status = upstreamStatus(edge.name, jobs, groups);
    if (status === null) open.push(edge.name);
    else if (!edge.runOn.includes(status)) return { skip: skipReason(edge, status) };
  }
  return { open };
}

function skipReason(edge: NeedEdge, status: TerminalJobStatus): string {
  return `upstream ${edge.name} ended ${status}; this job runs on ${edge.runOn.join(', ')}`;
}

function waveHasRoom(key: string, node: RunJobNode, jobs: Record<string, RunJobNode>, group: FanoutGroup): boolean {
  if (group.maxParallel === null) return true;
  let active = 0;
  for (const child of group.children) {
    const other = jobs[child];
    if (!other || child === key) continue;
    if (other.decided && other.status === null) active++;
    const earlierWaiting = !other.decided && other.status === null && (other.fanoutIndex ?? 0) < (node.fanoutIndex ?? 0);
    if (earlierWaiting) return false;
  }
  return active < group.maxParallel;
}

function sameReason(a: WaitingReason | null, b: WaitingReason): boolean {
  return a !== null && a.kind === b.kind && a.message === b.message;
}

/**
 * Decides, for every job still gated by the run, whether it is released, skipped or keeps
 * waiting (DAG-2, WAVE-1..3). Pure; decisions for one call are consistent with each other.
 */
export function evaluateGraph(jobs: Record<string, RunJobNode>, groups: Record<string, FanoutGroup>): GateDecision[] {
  const decisions: GateDecision[] = [];
  const scratch: Record<string, RunJobNode> = { ...jobs };
  for (const [key, node] of Object.entries(jobs)) {
    if (node.decided || node.status !== null) continue;
    const group = groups[node.baseName];
    if (group?.halted) {
      decisions.push({ jobKey: key, kind: 'skip', reason: `fail-fast: a sibling of ${node.baseName} failed` });
      continue;
    }
    const needs = needsDecision(node, jobs, groups);
    if ('skip' in needs) {
      decisions.push({ jobKey: key, kind: 'skip', reason: needs.skip });
      continue;
    }
    if (needs.open.length > 0) {
      const reason: WaitingReason = { kind: 'needs', message: `waiting for upstream jobs: ${needs.open.join(', ')}` };
      if (!sameReason(node.gate, reason)) decisions.push({ jobKey: key, kind: 'gate', reason });
      continue;
    }
    if (group && !waveHasRoom(key, node, scratch, group)) {
      const reason: WaitingReason = {
        kind: 'wave',
        message: `waiting for a free place in the fan-out window of ${node.baseName} (maxParallel ${group.maxParallel})`,
      };
      if (!sameReason(node.gate, reason)) decisions.push({ jobKey: key, kind: 'gate', reason });
      continue;
    }
    decisions.push({ jobKey: key, kind: 'release' });
    scratch[key] = { ...node, decided: true };
  }
  return decisions;
}

/** DAG-7: no job waits on needs while every upstream is terminal. Used by tests after each step. */
export function findStuckOnNeeds(jobs: Record<string, RunJobNode>, groups: Record<string, FanoutGroup>): string[] {
  return Object.entries(jobs)
    .filter(([, node]) => !node.decided && node.status === null && node.gate?.kind === 'needs')
    .filter(([, node]) => node.needs.every((edge) => upstreamStatus(edge.name, jobs, groups) !== null))
    .map(([key]) => key);
}
