import { z } from 'zod';

/** Only the fields normalization and matching read; everything else stays in the raw payload. */
const repositoryRef = z.looseObject({ full_name: z.string().min(1) });
const repository = repositoryRef.extend({
  default_branch: z.string().min(1).nullish(),
  clone_url: z.string().nullish(),
});

const common = {
  repository,
  installation: z.looseObject({ id: z.number().int() }).nullish(),
  sender: z.looseObject({ login: z.string(), id: z.number().int() }).nullish(),
};
const action = z.string().min(1);

export type GitHubCommon = z.output<z.ZodObject<typeof common>>;

export const pushPayload = z.looseObject({
  ...common,
  ref: z.string().min(1),
  after: z.string().min(1),
  deleted: z.boolean().optional(),
});

const prSide = z.looseObject({ ref: z.string().min(1), sha: z.string().min(1), repo: repositoryRef.extend({ clone_url: z.string().nullish() }).nullish() });

export const pullRequestPayload = z.looseObject({
  ...common,
  action,
  number: z.number().int(),
  pull_request: z.looseObject({ base: prSide.nullish(), head: prSide }),
});

export const reviewPayload = z.looseObject({
  ...common,
  action,
  pull_request: z.looseObject({ number: z.number().int(), base: prSide.nullish(), head: prSide }),
});

export const actionPayload = z.looseObject({ ...common, action });

export const commonPayload = z.looseObject(common);

export const issueCommentPayload = z.looseObject({
  ...common,
  action,
  issue: z.looseObject({ number: z.number().int() }),
  comment: z.looseObject({ body: z.string().nullish() }),
});

export const releasePayload = z.looseObject({
  ...common,
  action,
  release: z.looseObject({ tag_name: z.string().min(1), target_commitish: z.string().nullish() }),
});

export const refPayload = z.looseObject({ ...common, ref: z.string().nullish(), ref_type: z.enum(['branch', 'tag']) });

export const statusPayload = z.looseObject({
  ...common,
  sha: z.string().min(1),
  state: z.string(),
  context: z.string(),
  branches: z.array(z.looseObject({ name: z.string().min(1) })).nullish(),
});

export const workflowRunPayload = z.looseObject({
  ...common,
  action,
  workflow_run: z.looseObject({
    name: z.string().nullish(),
    head_branch: z.string().nullish(),
    conclusion: z.string().nullish(),
  }),
});
