import type { LockStepConfig } from '../ws/messages.ts';
import type { PlannedStep } from './job-scope.ts';

export type PlanItem =
  | { kind: 'single'; step: PlannedStep }
  | { kind: 'group'; name: string; failFast: boolean; maxParallel?: number; children: PlannedStep[] };

/** Lock steps in order, parallel-group children numbered in the flattened order of the wire. */
export function planSteps(steps: readonly LockStepConfig[]): PlanItem[] {
  let index = 0;
  return steps.map((step): PlanItem => {
    if (step.kind === 'parallel') {
      const children = step.children.map((child) => ({ index: index++, step: child }));
      return { kind: 'group', name: step.name, failFast: step.failFast, maxParallel: step.maxParallel, children };
    }
    return { kind: 'single', step: { index: index++, step } };
  });
}

export function stepsOf(item: PlanItem): PlannedStep[] {
  return item.kind === 'single' ? [item.step] : item.children;
}
