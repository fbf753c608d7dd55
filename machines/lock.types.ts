import type { TerminalJobStatus } from './status.ts';
import type { LabelMatcher } from './types.ts';

/**
 * The parts of a KiCI schema-29 lock file that run planning reads (lockfile.md §2–§7).
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
  jobs: LockJob[];
  concurrency?: LockWorkflowConcurrency;
  /** Whole-run wall clock in ms (`workflow_timeout`). */
  timeout?: number;
  approval?: LockApproval;
}

/** `max` and `cancelInProgress` are the policy of job-level groups too (lockfile.md §7.2). */
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

/** The verbatim source of a pure arrow function, evaluated by Switchyard (lockfile.md §7). */
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

export interface LockStaticJob {
  _type: 'static';
  name: string;
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
  /** Extension (lockfile.md §6): a shell command for the reference agent. */
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
