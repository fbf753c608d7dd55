import { z } from 'zod';
import { pattern } from './schema-common.ts';

const strings = z.array(z.string());
const patterns = z.array(pattern);
const repos = { repos: patterns.optional() };
const jsonPathMap = z.record(z.string(), z.unknown());

const push = z.looseObject({ _type: z.literal('push'), branches: patterns, paths: strings, ...repos });
const tag = z.looseObject({ _type: z.literal('tag'), patterns, ...repos });
const pr = z.looseObject({
  _type: z.literal('pr'),
  events: strings,
  targetBranches: patterns,
  sourceBranches: patterns,
  paths: strings,
  ...repos,
});
const comment = z.looseObject({
  _type: z.literal('comment'),
  actions: strings,
  source: z.enum(['issue', 'pr']).optional(),
  bodyMatch: pattern.optional(),
  ...repos,
});
const review = z.looseObject({ _type: z.literal('review'), actions: strings, states: strings, ...repos });
const withActions = z.looseObject({
  _type: z.enum(['review_comment', 'release', 'star', 'watch']),
  actions: strings,
  ...repos,
});
const dispatch = z.looseObject({
  _type: z.literal('dispatch'),
  types: strings,
  inputs: z.unknown().optional(),
  ...repos,
});
const refEvent = z.looseObject({
  _type: z.enum(['create', 'delete']),
  refTypes: z.array(z.enum(['branch', 'tag'])),
  patterns,
  ...repos,
});
const status = z.looseObject({ _type: z.literal('status'), contexts: strings, states: strings, ...repos });
const workflowRun = z.looseObject({
  _type: z.literal('workflow_run'),
  actions: strings,
  workflows: strings,
  conclusions: strings,
  ...repos,
});
const fork = z.looseObject({ _type: z.literal('fork'), ...repos });
const webhook = z.looseObject({ _type: z.literal('webhook'), events: strings, actions: strings, ...repos });
const genericWebhook = z.looseObject({
  _type: z.literal('generic_webhook'),
  source: z.string(),
  events: strings.optional(),
  match: jsonPathMap.optional(),
  not: jsonPathMap.optional(),
  auth: z
    .looseObject({
      method: z.enum(['hmac-sha256', 'api-key']),
      secret: z.string(),
      signatureHeader: z.string().optional(),
      header: z.string().optional(),
    })
    .optional(),
  path: z.string().optional(),
});
const schedule = z.looseObject({
  _type: z.literal('schedule'),
  cronExpression: z.string(),
  timezone: z.string(),
  description: z.string().optional(),
  inputs: z.unknown().optional(),
});

const optionalSource = { source: z.string().optional() };
const kiciEvent = z.looseObject({
  _type: z.literal('kici_event'),
  eventName: z.string(),
  match: jsonPathMap.optional(),
  not: jsonPathMap.optional(),
  ...optionalSource,
});
const workflowComplete = z.looseObject({
  _type: z.literal('workflow_complete'),
  name: z.string().optional(),
  status: strings.optional(),
  ...optionalSource,
});
const jobComplete = z.looseObject({
  _type: z.literal('job_complete'),
  workflow: z.string().optional(),
  job: z.string().optional(),
  status: strings.optional(),
  ...optionalSource,
});
const lifecycle = z.looseObject({
  _type: z.literal('lifecycle'),
  events: z.array(z.enum(['workflow_complete', 'job_complete', 'job_failed', 'registration_updated'])),
  sources: strings.optional(),
  description: z.string().optional(),
});

/** One `triggers[]` entry (docs/lockfile.md#triggers); `null` entries are kept and skipped by matching. */
export const trigger = z
  .discriminatedUnion(
    '_type',
    [
      push,
      tag,
      pr,
      comment,
      review,
      withActions,
      dispatch,
      refEvent,
      status,
      workflowRun,
      fork,
      webhook,
      genericWebhook,
      schedule,
      kiciEvent,
      workflowComplete,
      jobComplete,
      lifecycle,
    ],
    {
      error: (issue) =>
        issue.code === 'invalid_union'
          ? 'unknown trigger `_type`'
          : 'a trigger must be an object with a `_type`, or null',
    },
  )
  .nullable();
