import type { JobInput, JobReport, Release } from './job.events.ts';
import type { ConcurrencyScope, FanoutGroup, GateDecision, JobPlan, RunInput, RunJobNode } from './run.types.ts';
import { countsAsFailure } from './status.ts';
import { verdictFor } from './environment.ts';
import type { EnvironmentVerdict } from './environment.ts';
import type { InitFailure, InitResult } from './types.ts';

/** What a run hands its jobs: their inputs at spawn, what a release carries, and fail-fast halts (WAVE-3). */

export function jobInputOf(plan: JobPlan, run: { runId: string; maxAttempts: number; initFailure: InitFailure | null }, createdAt: number, gate: JobInput['gate']): JobInput {
  return {
    runId: run.runId,
    jobKey: plan.key,
    baseName: plan.baseName,
    requirements: plan.requirements,
    timeouts: plan.timeouts,
    maxAttempts: run.maxAttempts,
    gate,
    concurrency: plan.concurrency,
    initFailure: plan.initFailure ?? (run.initFailure ? { ...run.initFailure, jobName: plan.key } : null),
    createdAt,
    matrix: plan.fanoutIndex === null ? null : { values: plan.matrixValues, index: plan.fanoutIndex, total: plan.fanoutTotal ?? 1 },
    ...(plan.initFor ? { initFor: plan.initFor } : {}),
    ...(plan.hold ? { hold: plan.hold } : {}),
  };
}

export function jobInputs(input: RunInput, gates: Record<string, JobInput['gate']>): JobInput[] {
  const carried = input.carried ?? {};
  return input.jobs.filter((plan) => !plan.template && carried[plan.key] === undefined).map((plan) => jobInputOf(plan, input, input.createdAt, gates[plan.key] ?? null));
}

/** What a released job is handed: upstream results, and the values its init job resolved. */
export function releaseOf(upstream: Release['upstream'] | null, init: InitResult | null, scope: ConcurrencyScope | null): Release {
  const release: Release = {};
  if (upstream) release.upstream = upstream;
  if (!init) return release;
  const environment = [...(init.environmentNames ?? [])].reverse().find((name) => name !== '');
  if (init.env !== undefined || environment !== undefined) {
    release.resolved = { ...(init.env !== undefined && { env: init.env }), ...(environment !== undefined && { environment }) };
  }
  if (init.concurrencyGroup && scope) release.concurrency = { key: `${scope.repository}::${init.concurrencyGroup}`, policy: scope.policy };
  return release;
}

/**
 * The environment an init job named is checked against the run's frozen verdicts (ENV-2, ENV-4):
 * the release carries its hold, or the job fails with `environment_rules` instead.
 */
export function checkReleasedEnvironment(jobKey: string, release: Release, verdicts: Readonly<Record<string, EnvironmentVerdict>> | null): Release | InitFailure {
  const name = release.resolved?.environment;
  if (name === undefined || verdicts === null) return release;
  const verdict = verdictFor(name, verdicts);
  if (verdict.kind === 'fail') return { scope: 'job', category: 'environment_rules', message: verdict.message, jobName: jobKey };
  return { ...release, hold: verdict.kind === 'hold' ? verdict.hold : null };
}

/** failFast (WAVE-3): the first failed child of a fail-fast fan-out halts the group. */
export function haltedGroup(finished: Extract<JobReport, { type: 'job.finished' }> | null, groups: Record<string, FanoutGroup>): FanoutGroup | null {
  if (!finished || !countsAsFailure(finished.status) || finished.status === 'drift_dropped') return null;
  const group = Object.values(groups).find((g) => g.children.includes(finished.jobKey));
  if (!group?.failFast || group.halted) return null;
  group.halted = true;
  return group;
}

/** Siblings already released are told to skip; a job that was dispatched ignores it and runs to completion. */
export function haltSiblings(group: FanoutGroup | null, jobs: Record<string, RunJobNode>, _groups: Record<string, FanoutGroup>): GateDecision[] {
  if (!group) return [];
  return group.children
    .filter((key) => jobs[key]?.decided && jobs[key]?.status === null)
    .map((key) => ({ jobKey: key, kind: 'skip' as const, reason: 'fail-fast: a sibling failed' }));
}

