import { reportNotRun, sendStepStatus, type JobScope, type StepOutcome } from './job-scope.ts';
import type { PlanItem } from './plan.ts';
import type { StopRequest } from './process-group.ts';
import { runStep } from './step-runner.ts';

type Group = Extract<PlanItem, { kind: 'group' }>;

/**
 * Runs a parallel group's children at most `maxParallel` at a time. Children waiting for a slot are
 * reported `pending`; with `failFast`, the first failure stops the running siblings and cancels
 * the ones not started (docs/protocol.md#status-handling).
 */
export async function runGroup(scope: JobScope, group: Group, jobSignal: AbortSignal): Promise<StepOutcome[]> {
  const stopGroup = new AbortController();
  const signal = AbortSignal.any([jobSignal, stopGroup.signal]);
  const width = Math.min(group.maxParallel ?? group.children.length, group.children.length);
  for (const child of group.children.slice(width)) sendStepStatus(scope, child, 'pending');
  const outcomes: StepOutcome[] = [];
  let next = 0;
  const worker = async () => {
    for (let child = group.children[next++]; child !== undefined; child = group.children[next++]) {
      if (signal.aborted) {
        outcomes.push(reportNotRun(scope, child, 'cancelled'));
        continue;
      }
      const outcome = await runStep(scope, child, signal);
      outcomes.push(outcome);
      if (group.failFast && outcome.state === 'failed' && !outcome.continueOnError && !signal.aborted) {
        const request: StopRequest = { kind: 'fail_fast', force: false, message: `stopped by fail-fast: ${outcome.name} failed` };
        stopGroup.abort(request);
      }
    }
  };
  await Promise.all(Array.from({ length: width }, worker));
  return outcomes.sort((a, b) => a.index - b.index);
}
