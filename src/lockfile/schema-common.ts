import { z } from 'zod';

/** Milliseconds or seconds: a finite number ≥ 0. */
export const duration = z.number().nonnegative();

export const positiveInt = z.number().int().min(1);

export const stringMap = z.record(z.string(), z.string());

export const sourceRef = z.looseObject({ file: z.string(), export: z.string() });

/** `{type:"glob"|"regex", pattern, flags?}` (docs/lockfile.md#triggers). */
export const pattern = z.looseObject({
  type: z.enum(['glob', 'regex']),
  pattern: z.string(),
  flags: z.string().optional(),
});

const LABEL_MATCHER_SHAPE = 'expected {kind:"exact", value} or {kind:"regex", source, flags}';

/** `{kind:"exact", value}` or `{kind:"regex", source, flags}`; legacy plain strings are corrupt. */
export const labelMatcher = z.discriminatedUnion(
  'kind',
  [
    z.looseObject({ kind: z.literal('exact'), value: z.string() }),
    z.looseObject({ kind: z.literal('regex'), source: z.string(), flags: z.string() }),
  ],
  {
    error: (issue) =>
      typeof issue.input === 'string'
        ? `not a valid LabelMatcher: legacy plain-string label ${JSON.stringify(issue.input)}; ${LABEL_MATCHER_SHAPE}`
        : `not a valid LabelMatcher: ${LABEL_MATCHER_SHAPE}`,
  },
);

/** The verbatim source of a pure arrow function (docs/lockfile.md#init-jobs). */
export const inlineValue = z.looseObject({ _type: z.literal('inline'), expression: z.string() });

export const approval = z.looseObject({
  clauses: z.array(z.unknown()),
  reason: z.string().optional(),
  timeoutSeconds: duration.optional(),
  when: z.literal('always'),
});
