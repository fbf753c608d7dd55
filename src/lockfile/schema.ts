import { z } from 'zod';
import type { LockFile, LockWorkflow } from '../../machines/lock.types.ts';
import { approval, duration, positiveInt, sourceRef } from './schema-common.ts';
import { dynamicRule, job } from './schema-jobs.ts';
import { trigger } from './schema-triggers.ts';

const flag = z.boolean().optional();

/** One `workflows[]` entry (docs/lockfile.md#workflows). Unknown fields are kept and ignored. */
export const workflowSchema = z.looseObject({
  name: z.string(),
  source: sourceRef,
  description: z.string().optional(),
  contentHash: z.string(),
  compileSchemaVersion: z.number().int().nonnegative(),
  triggers: z.array(trigger),
  jobs: z.array(job),
  rules: z.array(dynamicRule).optional(),
  hashFiles: z.array(z.string()).optional(),
  resolvedHashFiles: z.array(z.string()).optional(),
  registries: z
    .array(
      z.looseObject({
        url: z.string(),
        scope: z.string().optional(),
        tokenSecret: z.string(),
        alwaysAuth: flag,
      }),
    )
    .optional(),
  installEnv: z.array(z.string()).optional(),
  concurrency: z.looseObject({ hasGroup: z.boolean(), cancelInProgress: flag, max: positiveInt.optional() }).optional(),
  timeout: duration.optional(),
  approval: approval.optional(),
  hasOnCancel: flag,
  hasCleanup: flag,
  hasOnSuccess: flag,
  hasOnFailure: flag,
});

/** A schema-29 lock file (docs/lockfile.md#top-level). `schemaVersion` is checked before this runs. */
export const lockFileSchema = z.looseObject({
  schemaVersion: z.literal(29),
  source: sourceRef,
  contentHash: z.string(),
  lockfileHash: z.string().optional(),
  workflows: z.array(workflowSchema),
});

export type ParsedLockFile = z.output<typeof lockFileSchema>;
export type ParsedWorkflow = z.output<typeof workflowSchema>;

/** Compile-time proof that what the schema accepts is the plain type run planning reads. */
type Assignable<T extends U, U> = [T, U];
export type LockFileSchemaCheck = [
  Assignable<ParsedLockFile, LockFile>,
  Assignable<ParsedWorkflow, LockWorkflow>,
];
