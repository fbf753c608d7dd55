import type { TerminalJobStatus } from './status.ts';
import type { LabelMatcher } from './types.ts';

/**
 * The parts of a KiCI schema-29 lock file that run planning reads (docs/lockfile.md#top-level).
 * Plain types: the parser validates the JSON against them; unknown fields are ignored.
 */
export interface LockFile {
  schemaVersion: 29;
  source: LockSource;
  contentHash: string;
  lockfileHash?: string;
  workflows: LockWorkflow[];
}

export interface LockSource {
  file: string;
  export: string;
}

export interface LockWorkflow {
  name: string;
  source?: LockSource;
  /** Hash of the workflow's TypeScript source; the stock agent checks it (`""` without source). */
  contentHash?: string;
  resolvedHashFiles?: string[];
  /** Always set by the parser; optional so hand-built workflows may omit it (never matches). */
  triggers?: (LockTrigger | null)[];
  jobs: LockJob[];
  concurrency?: LockWorkflowConcurrency;
  /** Whole-run wall clock in ms (`workflow_timeout`). */
  timeout?: number;
  approval?: LockApproval;
  /** Package registries whose token is a secret reference `<environment>:<secret>` (docs/lockfile.md#workflows). */
  registries?: LockRegistry[];
  /** Secret references `<environment>:<secret>` exposed to the dependency install step. */
  installEnv?: string[];
}

export interface LockRegistry {
  url: string;
  scope?: string;
  tokenSecret: string;
  alwaysAuth?: boolean;
}

/** Branch, tag and repo pattern (docs/lockfile.md#triggers); globs use picomatch semantics. */
export interface LockPattern {
  type: 'glob' | 'regex';
  pattern: string;
  flags?: string;
}

/** In `repos` (as in `paths`) a leading `!` excludes. */
interface LockRepoFilter {
  repos?: LockPattern[];
}

export type LockTrigger =
  | LockPushTrigger
  | LockTagTrigger
  | LockPrTrigger
  | LockCommentTrigger
  | LockReviewTrigger
  | LockActionTrigger
  | LockDispatchTrigger
  | LockRefTrigger
  | LockStatusTrigger
  | LockWorkflowRunTrigger
  | LockForkTrigger
  | LockWebhookTrigger
  | LockGenericWebhookTrigger
  | LockScheduleTrigger
  | LockKiciEventTrigger
  | LockUnmatchedTrigger;

export interface LockPushTrigger extends LockRepoFilter {
  _type: 'push';
  branches: LockPattern[];
  paths: string[];
}

export interface LockTagTrigger extends LockRepoFilter {
  _type: 'tag';
  patterns: LockPattern[];
}

export interface LockPrTrigger extends LockRepoFilter {
  _type: 'pr';
  events: string[];
  targetBranches: LockPattern[];
  sourceBranches: LockPattern[];
  paths: string[];
}

export interface LockCommentTrigger extends LockRepoFilter {
  _type: 'comment';
  actions: string[];
  source?: 'issue' | 'pr';
  bodyMatch?: LockPattern;
}

export interface LockReviewTrigger extends LockRepoFilter {
  _type: 'review';
  actions: string[];
  states: string[];
}

export interface LockActionTrigger extends LockRepoFilter {
  _type: 'review_comment' | 'release' | 'star' | 'watch';
  actions: string[];
}

export interface LockDispatchTrigger extends LockRepoFilter {
  _type: 'dispatch';
  types: string[];
  inputs?: unknown;
}

export interface LockRefTrigger extends LockRepoFilter {
  _type: 'create' | 'delete';
  refTypes: ('branch' | 'tag')[];
  patterns: LockPattern[];
}

export interface LockStatusTrigger extends LockRepoFilter {
  _type: 'status';
  /** Globs. */
  contexts: string[];
  states: string[];
}

export interface LockWorkflowRunTrigger extends LockRepoFilter {
  _type: 'workflow_run';
  actions: string[];
  workflows: string[];
  conclusions: string[];
}

export interface LockForkTrigger extends LockRepoFilter {
  _type: 'fork';
}

/** Catch-all: any event `type` listed in `events`. */
export interface LockWebhookTrigger extends LockRepoFilter {
  _type: 'webhook';
  events: string[];
  actions: string[];
}

export interface LockGenericWebhookTrigger {
  _type: 'generic_webhook';
  source: string;
  events?: string[];
  /** JSONPath → expected value, over the whole payload. */
  match?: Record<string, unknown>;
  not?: Record<string, unknown>;
  path?: string;
}

export interface LockScheduleTrigger {
  _type: 'schedule';
  cronExpression: string;
  timezone: string;
  description?: string;
  inputs?: unknown;
}

/** An event a workflow emitted (`ctx.emit`; docs/events.md). */
export interface LockKiciEventTrigger {
  _type: 'kici_event';
  eventName: string;
  /** JSONPath → expected value, over the emitted payload. */
  match?: Record<string, unknown>;
  not?: Record<string, unknown>;
  /** The repository that emitted it. */
  source?: string;
}

/** Accepted by the parser; Switchyard never matches these. */
export interface LockUnmatchedTrigger {
  _type: 'workflow_complete' | 'job_complete' | 'lifecycle';
}

/** `max` and `cancelInProgress` are the policy of job-level groups too (docs/architecture.md#concurrency-groups). */
export interface LockWorkflowConcurrency {
  hasGroup: boolean;
  /** @default true */
  cancelInProgress?: boolean;
  /** @default 1 */
  max?: number;
}

export interface LockApproval {
  clauses: unknown[];
  reason?: string;
  /** @default 86400 */
  timeoutSeconds?: number;
  when: 'always' | 'drift';
}

/** The verbatim source of a pure arrow function, evaluated by Switchyard (docs/lockfile.md#init-jobs). */
export interface LockInlineValue {
  _type: 'inline';
  expression: string;
}

export type LockJob = LockStaticJob | LockDynamicJob;

export type LockNeed = string | LockNeedOnJob | LockNeedOnGroup;

export interface LockNeedOnJob {
  name: string;
  runOn: TerminalJobStatus[];
}

export interface LockNeedOnGroup {
  group: string;
  runOn: TerminalJobStatus[];
}

/** Host fan-out; Switchyard v1 rejects it (`matrix_expansion`). */
export interface LockHostFanout {
  include: LabelMatcher[][];
  exclude: LabelMatcher[];
}

/** A rule the stock agent evaluates before running a job or step (docs/lockfile.md#jobs). */
export interface LockDynamicRule {
  _type: 'dynamic';
  label: string;
  source: { file: string; index: number };
}

export interface LockStaticJob {
  _type: 'static';
  name: string;
  rules?: LockDynamicRule[];
  runsOn?: LabelMatcher[];
  excludeLabels?: LabelMatcher[];
  /** @default 'deterministic' */
  runsOnPick?: 'deterministic' | 'any';
  runsOnAll?: LockHostFanout;
  maxParallel?: number;
  failFast?: boolean;
  needs: LockNeed[];
  dependsOnGroups?: string[];
  steps: LockStep[];
  matrix?: LockMatrix;
  include?: LockMatrixEntry[];
  exclude?: LockMatrixEntry[];
  environments?: LockEnvironmentRef[];
  env?: Record<string, string> | LockInlineValue;
  dynamicEnv?: boolean;
  /** Absent while `dynamicConcurrencyGroup` is true means an impure function (needs an init job). */
  concurrencyGroup?: string | LockInlineValue;
  dynamicConcurrencyGroup?: boolean;
  /** Whole job in ms, agent-enforced. */
  timeout?: number;
  /** Seconds from SIGTERM to SIGKILL on cancel. @default 30 */
  gracePeriod?: number;
  /** Clone the repository before the steps. @default true */
  checkout?: boolean;
  approval?: LockApproval;
}

/** A generator the stock agent evaluates at run time (`dynamicJobFn`). */
export interface LockDynamicJob {
  _type: 'dynamic';
  source: { file: string; index: number };
  group?: string;
  needs?: LockNeed[];
  resultAware?: boolean;
}

/** `value: ""` with `dynamic: true` is an impure function that needs an init job. */
export interface LockEnvironmentRef {
  value: string | LockInlineValue;
  dynamic: boolean;
}

export type LockMatrix = LockStaticMatrix | LockDynamicMatrix;

export type LockMatrixScalar = string | number | boolean;

/** An `include` / `exclude` entry, or one combination of the array form. */
export type LockMatrixEntry = Record<string, LockMatrixScalar>;

/** Map form: cartesian product in key order. Array form: combinations listed; a scalar `v` is `{value: v}`. */
export interface LockStaticMatrix {
  _type: 'static';
  values: Record<string, LockMatrixScalar[]> | (LockMatrixScalar | LockMatrixEntry)[];
}

export interface LockDynamicMatrix {
  _type: 'dynamic';
  source: { file: string; jobName: string };
}

export type LockStep = LockSequentialStep | LockParallelGroup;

export interface LockSequentialStep {
  kind?: 'sequential';
  name: string;
  hasOutputs: boolean;
  continueOnError?: boolean;
  timeout?: number;
  /** Extension (docs/lockfile.md#steps-and-the-run-extension): a shell command for the reference agent. */
  run?: string;
  shell?: string;
  env?: Record<string, string>;
  workingDirectory?: string;
}

export interface LockParallelGroup {
  kind: 'parallel';
  name: string;
  failFast: boolean;
  maxParallel?: number;
  children: LockSequentialStep[];
}
