import { z } from 'zod';
import { id, stringMap, timestamp } from './common.ts';

/** `job.dispatch` (docs/protocol.md#jobdispatch) and the lock steps it carries (docs/lockfile.md#steps-and-the-run-extension). */

const retrySchema = z.object({
  maxAttempts: z.number().int().positive(),
  delayMs: z.number().int().nonnegative(),
  backoff: z.enum(['fixed', 'exponential']),
  maxDelayMs: z.number().int().nonnegative().optional(),
});

const approvalSchema = z.object({
  clauses: z.array(z.unknown()),
  reason: z.string().optional(),
  timeoutSeconds: z.number().positive().optional(),
  when: z.enum(['always', 'drift']),
});

export const sequentialStepSchema = z
  .object({
    kind: z.literal('sequential').optional(),
    name: z.string().min(1),
    hasOutputs: z.boolean(),
    continueOnError: z.boolean().optional(),
    timeout: z.number().int().positive().optional(),
    retry: retrySchema.optional(),
    cache: z.unknown().optional(),
    sourceLocation: z.object({ file: z.string(), line: z.number(), column: z.number() }).optional(),
    hasRules: z.boolean().optional(),
    rules: z.unknown().optional(),
    hasOnCancel: z.boolean().optional(),
    hasCleanup: z.boolean().optional(),
    hasCheck: z.boolean().optional(),
    hasWhenInSync: z.boolean().optional(),
    approval: approvalSchema.optional(),
    run: z.string().min(1).optional(),
    shell: z.string().optional(),
    env: stringMap.optional(),
    workingDirectory: z.string().optional(),
  })
  .superRefine((step, ctx) => {
    if (step.run === undefined) {
      for (const key of ['shell', 'env', 'workingDirectory'] as const) {
        if (step[key] !== undefined) ctx.addIssue({ code: 'custom', path: [key], message: 'only valid next to run' });
      }
    }
    if (step.shell !== undefined && !['bash', 'sh'].includes(step.shell) && !step.shell.startsWith('/')) {
      ctx.addIssue({ code: 'custom', path: ['shell'], message: 'must be "bash", "sh" or an absolute path' });
    }
    const dir = step.workingDirectory;
    if (dir !== undefined && (dir.startsWith('/') || dir.split(/[\\/]/).includes('..'))) {
      ctx.addIssue({ code: 'custom', path: ['workingDirectory'], message: 'must be relative, without ".."' });
    }
  });

export const parallelGroupSchema = z.object({
  kind: z.literal('parallel'),
  name: z.string().min(1),
  failFast: z.boolean(),
  maxParallel: z.number().int().positive().optional(),
  children: z.array(sequentialStepSchema),
});

export const lockStepSchema = z.discriminatedUnion('kind', [parallelGroupSchema, sequentialStepSchema]);

/** Keys that carry secrets travel only at the top level of the dispatch, never in `jobConfig`. */
const SECRET_BEARING_KEYS = ['secrets', 'namespacedSecrets', 'runPublicKey', 'npmRegistries', 'installEnvSecrets'];

/** Loose: keys not listed here are kept, so a validated dispatch can be sent as it is. */
export const jobConfigSchema = z
  .looseObject({
    workflowName: z.string().optional(),
    name: z.string().optional(),
    baseJobName: z.string().optional(),
    /** `{file, export}` for a job; a build-only dispatch names no export, an init job only the file (docs/lockfile.md#init-jobs). */
    source: z.union([z.string(), z.object({ file: z.string(), export: z.string().optional() })]).optional(),
    contentHash: z.string().optional(),
    resolvedHashFiles: z.unknown().optional(),
    steps: z.array(lockStepSchema).optional(),
    needs: z.unknown().optional(),
    rules: z.unknown().optional(),
    event: z.unknown().optional(),
    provider: z.string().optional(),
    matrixValues: z.record(z.string(), z.unknown()).optional(),
    dispatchInputs: z.record(z.string(), z.unknown()).optional(),
    agent: z
      .object({
        host: z.string().optional(),
        labels: z.array(z.string()).optional(),
        platform: z.string().optional(),
        arch: z.string().optional(),
      })
      .optional(),
    fanoutIndex: z.number().int().nonnegative().optional(),
    fanoutTotal: z.number().int().positive().optional(),
    environment: z.string().nullable().optional(),
    environmentVars: stringMap.optional(),
    jobEnv: stringMap.optional(),
    timeout: z.number().int().positive().optional(),
    /** Switchyard extension: seconds from SIGTERM to SIGKILL (the lock job's `gracePeriod`). */
    gracePeriod: z.number().nonnegative().optional(),
    container: z.unknown().optional(),
    checkout: z.boolean().optional(),
    hasConcurrencyGroup: z.boolean().optional(),
    concurrencyEvaluationTimeoutMs: z.number().int().positive().optional(),
    checkMode: z.enum(['apply', 'check', 'check-fail-on-drift']).optional(),
    runsOnPick: z.enum(['deterministic', 'any']).optional(),
    initOnly: z.boolean().optional(),
    buildOnly: z.boolean().optional(),
    dynamicJobFn: z.unknown().optional(),
    bringupOnly: z.boolean().optional(),
  })
  .superRefine((config, ctx) => {
    for (const key of SECRET_BEARING_KEYS) {
      if (key in config) ctx.addIssue({ code: 'custom', path: [key], message: 'secrets travel only at the top level' });
    }
  });

export const sourceAuthSchema = z
  .object({
    kind: z.enum(['basic', 'ssh']),
    user: z.string().optional(),
    secret: z.string().min(1),
    sshHostKeyPolicy: z.enum(['accept-new', 'pinned']).optional(),
    sshKnownHostsPem: z.string().optional(),
  })
  .superRefine((auth, ctx) => {
    if (auth.sshHostKeyPolicy === 'pinned' && !auth.sshKnownHostsPem) {
      ctx.addIssue({ code: 'custom', path: ['sshKnownHostsPem'], message: 'required when sshHostKeyPolicy is pinned' });
    }
  });

const npmRegistrySchema = z.object({
  url: z.string(),
  scope: z.string().optional(),
  alwaysAuth: z.boolean(),
  token: z.string(),
});

/** `job.dispatch`'s fields, each on its own; `dispatchSchema` adds the checks between them. */
const dispatchFields = z.object({
  type: z.literal('job.dispatch'),
  messageId: id,
  runId: id,
  jobId: id,
  repoUrl: z.string().min(1),
  ref: z.string().min(1),
  sha: z.string().min(1),
  lockFileUrl: z.string(),
  jobConfig: jobConfigSchema,
  timestamp,
  token: z.string().optional(),
  sourceAuth: sourceAuthSchema.optional(),
  workflowAuth: sourceAuthSchema.optional(),
  secrets: stringMap.optional(),
  namespacedSecrets: z.record(z.string(), stringMap).optional(),
  maxLogSizeBytes: z.number().int().positive().optional(),
  sourceTarUrl: z.string().optional(),
  sourceTarHash: z.string().optional(),
  depsUrl: z.string().optional(),
  depsHash: z.string().optional(),
  requestId: z.string().optional(),
  runPublicKey: z.string().optional(),
  upstreamJobOutputs: z.record(z.string(), z.record(z.string(), z.unknown())).optional(),
  upstreamJobStatuses: z.record(z.string(), z.string()).optional(),
  npmRegistries: z.array(npmRegistrySchema).optional(),
  installEnvSecrets: stringMap.optional(),
  orgId: z.string().optional(),
  repoId: z.string().optional(),
  cacheRefScope: z.enum(['shared', 'isolated']).optional(),
});

export const dispatchSchema = dispatchFields.superRefine((dispatch, ctx) => {
  const { token, sourceAuth } = dispatch;
  if (token !== undefined && sourceAuth !== undefined) {
    if (sourceAuth.kind !== 'basic' || sourceAuth.secret !== token) {
      ctx.addIssue({ code: 'custom', path: ['token'], message: 'must agree with sourceAuth (kind basic, same secret)' });
    }
  }
  if ((dispatch.sourceTarUrl === undefined) !== (dispatch.sourceTarHash === undefined)) {
    ctx.addIssue({ code: 'custom', path: ['sourceTarHash'], message: 'sourceTarUrl and sourceTarHash go together' });
  }
  if ((dispatch.depsUrl === undefined) !== (dispatch.depsHash === undefined)) {
    ctx.addIssue({ code: 'custom', path: ['depsHash'], message: 'depsUrl and depsHash go together' });
  }
});

/**
 * The fields secret resolution adds to a dispatch that was built and checked already
 * (src/secrets/index.ts). None of them takes part in the checks between fields above, so checking
 * them alone checks the whole; a field resolution adds without a place here is refused.
 */
export const dispatchSecretFieldsSchema = dispatchFields
  .pick({ secrets: true, namespacedSecrets: true, runPublicKey: true, npmRegistries: true, installEnvSecrets: true })
  .strict();

export type RetryPolicy = z.infer<typeof retrySchema>;
export type StepApproval = z.infer<typeof approvalSchema>;
export type SequentialStep = z.infer<typeof sequentialStepSchema>;
export type ParallelGroup = z.infer<typeof parallelGroupSchema>;
export type LockStepConfig = z.infer<typeof lockStepSchema>;
export type JobConfig = z.infer<typeof jobConfigSchema>;
export type SourceAuth = z.infer<typeof sourceAuthSchema>;
export type JobDispatch = z.infer<typeof dispatchSchema>;
