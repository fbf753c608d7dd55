import { z } from 'zod';
import { TERMINAL_JOB_STATUSES } from '../../machines/status.ts';
import { approval, duration, inlineValue, labelMatcher, positiveInt, stringMap } from './schema-common.ts';

const flag = z.boolean().optional();
const runOn = z.array(z.enum(TERMINAL_JOB_STATUSES));
const indexedSource = z.looseObject({ file: z.string(), index: z.number().int() });

export const dynamicRule = z.looseObject({ _type: z.literal('dynamic'), label: z.string(), source: indexedSource });

const need = z.union(
  [z.string(), z.looseObject({ name: z.string(), runOn }), z.looseObject({ group: z.string(), runOn })],
  { error: 'a need must be a job name, {name, runOn} or {group, runOn}' },
);

/** An ordinary step, with the `run` extension fields (docs/lockfile.md#steps-and-the-run-extension; their rules are checked after parsing). */
const sequentialStep = z.looseObject({
  kind: z
    .literal('sequential', { error: 'a step in a parallel group must be sequential (groups do not nest)' })
    .optional(),
  name: z.string(),
  hasOutputs: z.boolean(),
  continueOnError: flag,
  timeout: duration.optional(),
  retry: z
    .looseObject({
      maxAttempts: positiveInt,
      delayMs: duration,
      backoff: z.enum(['fixed', 'exponential']),
      maxDelayMs: duration,
    })
    .optional(),
  sourceLocation: z.looseObject({ file: z.string(), line: z.number(), column: z.number() }).optional(),
  hasRules: flag,
  hasOnCancel: flag,
  hasCleanup: flag,
  hasCheck: flag,
  hasWhenInSync: flag,
  approval: approval.extend({ when: z.enum(['always', 'drift']) }).optional(),
  run: z.string().optional(),
  shell: z.string().optional(),
  env: stringMap.optional(),
  workingDirectory: z.string().optional(),
});

const parallelGroup = z.looseObject({
  kind: z.literal('parallel'),
  name: z.string(),
  failFast: z.boolean(),
  maxParallel: positiveInt.optional(),
  children: z.array(sequentialStep),
});

const step = z.discriminatedUnion('kind', [parallelGroup, sequentialStep], {
  error: 'a step `kind` is "sequential" (or absent) or "parallel"',
});

const scalar = z.union([z.string(), z.number(), z.boolean()]);
const matrixEntry = z.record(z.string(), scalar);

const matrix = z.discriminatedUnion('_type', [
  z.looseObject({
    _type: z.literal('static'),
    values: z.union([z.record(z.string(), z.array(scalar)), z.array(z.union([scalar, matrixEntry]))], {
      error: 'matrix values are a map of value lists or a list of combinations',
    }),
  }),
  z.looseObject({ _type: z.literal('dynamic'), source: z.looseObject({ file: z.string(), jobName: z.string() }) }),
]);

const hostFanout = z.looseObject({ include: z.array(z.array(labelMatcher)), exclude: z.array(labelMatcher) });

/** An env map whose keys cannot be mistaken for a broken inline value. */
const envOrInline = z.union(
  [inlineValue, stringMap.refine((map) => !('_type' in map), 'an inline env is {_type:"inline", expression}')],
  { error: 'env must be a map of strings or {_type:"inline", expression}' },
);

const staticJob = z.looseObject({
  _type: z.literal('static'),
  name: z.string(),
  runsOn: z.array(labelMatcher).optional(),
  excludeLabels: z.array(labelMatcher).optional(),
  runsOnPick: z.enum(['deterministic', 'any']).optional(),
  runsOnAll: hostFanout.optional(),
  onUnreachable: z.enum(['skip', 'fail', 'hold']).optional(),
  includeUninitialized: flag,
  maxParallel: positiveInt.optional(),
  failFast: flag,
  needs: z.array(need),
  dependsOnGroups: z.array(z.string()).optional(),
  steps: z.array(step),
  matrix: matrix.optional(),
  include: z.array(matrixEntry).optional(),
  exclude: z.array(matrixEntry).optional(),
  rules: z.array(dynamicRule).optional(),
  environments: z.array(z.looseObject({ value: z.union([z.string(), inlineValue]), dynamic: z.boolean() })).optional(),
  env: envOrInline.optional(),
  dynamicEnv: flag,
  concurrencyGroup: z.union([z.string(), inlineValue]).optional(),
  dynamicConcurrencyGroup: flag,
  timeout: duration.optional(),
  gracePeriod: duration.optional(),
  container: z.union([z.string(), z.looseObject({ image: z.string(), env: stringMap.optional() })]).optional(),
  checkout: flag,
  approval: approval.optional(),
  hasOnCancel: flag,
  hasCleanup: flag,
  hasOnSuccess: flag,
  hasOnFailure: flag,
  hasBeforeStep: flag,
  hasAfterStep: flag,
});

const dynamicJob = z.looseObject({
  _type: z.literal('dynamic'),
  source: indexedSource,
  group: z.string().optional(),
  needs: z.array(need).optional(),
  resultAware: flag,
});

export const job = z.discriminatedUnion('_type', [staticJob, dynamicJob], {
  error: (issue) =>
    issue.code === 'invalid_union' ? 'a job `_type` is "static" or "dynamic"' : 'a job must be an object',
});

