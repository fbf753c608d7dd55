import type { LockStep } from '../../machines/lock.types.ts';
import { lockJobNameOf } from '../../machines/run.matrix.ts';
import { isInitJobKey } from '../../machines/run.plan.ts';
import { isRunSource } from '../pipeline/run-source.ts';

/** `stepIndex` -1 carries the runner's own lines (clone, setup), not a step's. */
export const RUNNER_STEP_NAME = 'runner';

export interface StepSources {
  jobs: { jobKey: string; steps: unknown }[];
  inputSummary: unknown;
}

/**
 * Names each job's step indices: the steps the agent reported (hook steps included) first, then
 * the lock file's steps in flattened order, so older attempts and unreported steps have names too.
 */
export function stepNamer(sources: StepSources): (jobKey: string, stepIndex: number) => string {
  const reported = new Map<string, Map<number, string>>();
  for (const job of sources.jobs) reported.set(job.jobKey, reportedNames(job.steps));
  const source = isRunSource(sources.inputSummary) ? sources.inputSummary : null;
  const lockNames = new Map<string, string[]>();
  for (const job of source?.workflow.jobs ?? []) if (job._type === 'static') lockNames.set(job.name, lockStepNames(job.steps));
  return (jobKey, stepIndex) => {
    if (stepIndex === -1) return RUNNER_STEP_NAME;
    const fromLock = isInitJobKey(jobKey) ? ['init'] : lockNames.get(lockJobNameOf(jobKey));
    return reported.get(jobKey)?.get(stepIndex) ?? fromLock?.[stepIndex] ?? `step ${stepIndex}`;
  };
}

function reportedNames(steps: unknown): Map<number, string> {
  const names = new Map<number, string>();
  if (!Array.isArray(steps)) return names;
  for (const step of steps as unknown[]) {
    if (typeof step !== 'object' || step === null) continue;
    const { index, name } = step as { index?: unknown; name?: unknown };
    if (typeof index === 'number' && typeof name === 'string') names.set(index, name);
  }
  return names;
}

/** A lock-file job's step names in the order the agent numbers them (a parallel group's children in turn). */
export function lockStepNames(steps: readonly LockStep[]): string[] {
  return steps.flatMap((step) => (step.kind === 'parallel' ? step.children.map((child) => child.name) : [step.name]));
}
