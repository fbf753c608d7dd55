import { aggregateStatus } from './status.ts';
import type { TerminalJobStatus } from './status.ts';
import type { CarriedJob, FanoutGroup, GateDecision, JobPlan, RunJobNode } from './run.types.ts';
import type { InitFailure, NeedEdge, UpstreamResults, WaitingReason } from './types.ts';

const APPROVAL_GATE: WaitingReason = { kind: 'approval', message: 'waiting for workflow approval' };

/**
 * The run's job graph at creation, and the gate each job starts behind: `null` for a job that is
 * eligible at once. Decisions that must reach a job after spawn (skips, and releases that carry
 * upstream results or an init result) are returned as `initial`.
 */
export function buildGraph(plans: readonly JobPlan[], held: boolean, carried: Readonly<Record<string, CarriedJob>> = {}) {
  const groups: Record<string, FanoutGroup> = {};
  const jobs: Record<string, RunJobNode> = {};
  for (const plan of plans) {
    const group = (groups[plan.baseName] ??= { children: [], maxParallel: plan.maxParallel, failFast: plan.failFast, halted: false });
    group.children.push(plan.key);
    const kept = carried[plan.key];
    jobs[plan.key] = kept ? carriedNodeOf(plan, kept) : nodeOf(plan);
  }
  const decisions = held ? [] : evaluateGraph(jobs, groups);
  const initialGates: Record<string, WaitingReason | null> = {};
  for (const [key, node] of Object.entries(jobs)) {
    if (carried[key]) continue;
    const decision = decisions.find((d) => d.jobKey === key);
    if (held) node.gate = APPROVAL_GATE;
    initialGates[key] = isBareRelease(decision) ? null : decision?.kind === 'gate' ? decision.reason : (node.gate ?? NEEDS_GATE);
  }
  applyDecisions(jobs, decisions);
  return { jobs, groups, initialGates, initial: decisions.filter((d) => d.kind !== 'gate' && !isBareRelease(d)) };
}

/** A release with nothing to hand over: the job can start eligible instead of being told. */
function isBareRelease(decision: GateDecision | undefined): boolean {
  return decision?.kind === 'release' && decision.upstream === null && decision.init === null;
}

export const NEEDS_GATE: WaitingReason = { kind: 'needs', message: 'waiting for upstream jobs' };

export function nodeOf(plan: JobPlan): RunJobNode {
  const status = plan.initFailure ? 'failed' : null;
  const node: RunJobNode = { baseName: plan.baseName, fanoutIndex: plan.fanoutIndex, needs: plan.needs, status, decided: false, gate: null };
  if (plan.initJob !== undefined) node.initJob = plan.initJob;
  if (plan.template === true) node.template = true;
  return node;
}

/** A job a failed-only rerun keeps: ended `success` before the run starts, with its outputs (docs/http-api.md#rerun). */
function carriedNodeOf(plan: JobPlan, kept: CarriedJob): RunJobNode {
  const node: RunJobNode = { ...nodeOf(plan), status: 'success', decided: true, reason: `carried over from run ${kept.fromRun}` };
  if (kept.outputs) node.outputs = kept.outputs;
  return node;
}

/** Updates nodes in place with the decisions just taken, so none is taken twice. */
export function applyDecisions(jobs: Record<string, RunJobNode>, decisions: readonly GateDecision[]): void {
  for (const decision of decisions) {
    const node = jobs[decision.jobKey];
    if (!node) continue;
    if (decision.kind === 'gate') {
      node.gate = decision.reason;
      continue;
    }
    node.decided = true;
    node.gate = null;
    // A template has no actor to report its end: the run records it.
    if (node.template && decision.kind === 'skip') {
      node.status = 'skipped';
      node.reason = decision.reason;
    }
    if (node.template && decision.kind === 'fail') {
      node.status = 'failed';
      node.reason = decision.failure.message;
      node.failure = decision.failure;
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
    const decision = decide(key, node, jobs, groups, scratch);
    if (decision === null) continue;
    decisions.push(decision);
    if (decision.kind === 'release') scratch[key] = { ...node, decided: true };
  }
  return decisions;
}

function decide(
  key: string,
  node: RunJobNode,
  jobs: Record<string, RunJobNode>,
  groups: Record<string, FanoutGroup>,
  scratch: Record<string, RunJobNode>,
): GateDecision | null {
  const group = groups[node.baseName];
  if (group?.halted) return { jobKey: key, kind: 'skip', reason: `fail-fast: a sibling of ${node.baseName} failed` };
  const needs = needsDecision(node, jobs, groups);
  if ('skip' in needs) return { jobKey: key, kind: 'skip', reason: needs.skip };
  const init = node.initJob === undefined ? null : jobs[node.initJob];
  if (init && node.initJob !== undefined) {
    if (init.status === null) return gate(key, node, { kind: 'needs', message: `waiting for upstream jobs: ${[...needs.open, `init job ${node.initJob}`].join(', ')}` });
    if (init.status !== 'success') return { jobKey: key, kind: 'fail', failure: initJobFailure(key, node.initJob, init) };
    if (node.template) return { jobKey: key, kind: 'expand', init: init.initResult ?? {} };
  }
  if (needs.open.length > 0) return gate(key, node, { kind: 'needs', message: `waiting for upstream jobs: ${needs.open.join(', ')}` });
  if (group && !waveHasRoom(key, node, scratch, group)) {
    return gate(key, node, {
      kind: 'wave',
      message: `waiting for a free place in the fan-out window of ${node.baseName} (maxParallel ${group.maxParallel})`,
    });
  }
  return { jobKey: key, kind: 'release', upstream: upstreamResults(node, jobs, groups), init: init?.initResult ?? (init ? {} : null) };
}

/** A gate decision, unless the job already waits for the same reason. */
function gate(key: string, node: RunJobNode, reason: WaitingReason): GateDecision | null {
  return sameReason(node.gate, reason) ? null : { jobKey: key, kind: 'gate', reason };
}

function initJobFailure(key: string, initKey: string, init: RunJobNode): InitFailure {
  const why = init.reason ? `: ${init.reason}` : '';
  return { scope: 'job', category: 'dynamic_eval', message: `init job ${initKey} ended ${init.status ?? 'unknown'}${why}`, jobName: key };
}

/**
 * DAG-4: statuses and outputs of the direct upstreams, by child name and, for a fan-out, also by
 * base name (its aggregate status, and its children's outputs merged in fan-out order).
 */
export function upstreamResults(node: RunJobNode, jobs: Record<string, RunJobNode>, groups: Record<string, FanoutGroup>): UpstreamResults | null {
  if (node.needs.length === 0) return null;
  const results: UpstreamResults = { statuses: {}, outputs: {} };
  for (const edge of node.needs) {
    const children = groups[edge.name]?.children ?? [];
    const merged: Record<string, unknown> = {};
    for (const child of children) {
      const upstream = jobs[child];
      if (!upstream?.status) continue;
      results.statuses[child] = upstream.status;
      if (upstream.outputs) {
        results.outputs[child] = upstream.outputs;
        Object.assign(merged, upstream.outputs);
      }
    }
    if (children.length === 1 && children[0] === edge.name) continue;
    const aggregate = upstreamStatus(edge.name, jobs, groups);
    if (aggregate) results.statuses[edge.name] = aggregate;
    if (Object.keys(merged).length > 0) results.outputs[edge.name] = merged;
  }
  return results;
}

/** DAG-7: no job waits on needs while every upstream is terminal. Used by tests after each step. */
export function findStuckOnNeeds(jobs: Record<string, RunJobNode>, groups: Record<string, FanoutGroup>): string[] {
  return Object.entries(jobs)
    .filter(([, node]) => !node.decided && node.status === null && node.gate?.kind === 'needs')
    .filter(([, node]) => node.needs.every((edge) => upstreamStatus(edge.name, jobs, groups) !== null))
    .filter(([, node]) => node.initJob === undefined || jobs[node.initJob]?.status !== null)
    .map(([key]) => key);
}
