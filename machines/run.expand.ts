import { MAX_MATRIX_COMBINATIONS, matrixChildName } from './run.matrix.ts';
import { nodeOf } from './run.graph.ts';
import type { FanoutGroup, JobPlan, RunJobNode } from './run.types.ts';
import type { InitFailure, InitResult } from './types.ts';

export type Expansion = { ok: true; plans: JobPlan[] } | { ok: false; failure: InitFailure };

/**
 * The children of a dynamic-matrix job from its init job's `matrixValues` (docs/lockfile.md#jobs):
 * the same rules as a static matrix — 1 to 256 combinations, child names unique.
 */
export function expandTemplate(template: JobPlan, init: InitResult): Expansion {
  const fail = (message: string): Expansion => ({
    ok: false,
    failure: { scope: 'job', category: 'matrix_expansion', message: `job ${template.key}: ${message}`, jobName: template.key },
  });
  const combinations = init.matrixValues;
  if (combinations === undefined) return fail('its init job returned no matrixValues');
  if (combinations.length === 0) return fail('the matrix expands to zero combinations');
  if (combinations.length > MAX_MATRIX_COMBINATIONS) return fail(`the matrix expands to more than ${MAX_MATRIX_COMBINATIONS} combinations`);
  const keys = combinations.map((values) => matrixChildName(template.baseName, values));
  const clash = keys.find((key, index) => keys.indexOf(key) !== index);
  if (clash !== undefined) return fail(`two matrix combinations have the same child name ${clash}`);
  const plans = combinations.map((values, index): JobPlan => {
    const { template: _template, ...plan } = template;
    return { ...plan, key: keys[index] ?? template.key, fanoutIndex: index, fanoutTotal: combinations.length, matrixValues: { ...values } };
  });
  return { ok: true, plans };
}

/** Replaces the template's node by its children's, in place; the fan-out group lists the children. */
export function replaceTemplate(jobs: Record<string, RunJobNode>, groups: Record<string, FanoutGroup>, templateKey: string, plans: readonly JobPlan[]): void {
  const template = jobs[templateKey];
  if (!template) return;
  delete jobs[templateKey];
  for (const plan of plans) jobs[plan.key] = nodeOf(plan);
  const group = groups[template.baseName];
  if (group) group.children = plans.map((plan) => plan.key);
}
