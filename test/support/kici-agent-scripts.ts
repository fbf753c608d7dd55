import type { JobDispatch } from '../../src/ws/messages.ts';

/** What an init job computed (lockfile.md §7). `matrixValues` lists combinations, e.g. `[{os: "linux"}, {os: "mac"}]`. */
export interface InitResult {
  environmentNames?: string[];
  env?: Record<string, string>;
  concurrencyGroup?: string;
  matrixValues?: Record<string, unknown>[];
  [key: string]: unknown;
}

/** One step as the agent will report it. `skipped` steps are reported without running. */
export interface StepPlan {
  index: number;
  name: string;
  outcome: 'success' | 'failed' | 'skipped';
  /** Lines of the step's own log (`log.chunk` with its index). */
  lines: string[];
  /** For `failed`: the thrown message and the exit code, formatted as the stock agent does. */
  error?: { message: string; exitCode: number };
}

/** How the test agent answers one `job.dispatch`. */
export type JobScript = StepsScript | InitScript | HoldScript | RejectScript | SilentScript;
/** Runs the planned steps; the job fails if one does; `outputs` go into a successful `job.status`. */
export type StepsScript = { kind: 'steps'; steps: StepPlan[]; outputs?: Record<string, unknown> };
/** One step `init` at index 0, then `initComplete`/`initResult`, or `error`/`initFailed`. */
export type InitScript = { kind: 'init'; lines: string[]; result: { ok: true; initResult: InitResult } | { ok: false; error: string } };
/** Ack, running, heartbeats; ends when the test calls `finish()` or the coordinator cancels. */
export type HoldScript = { kind: 'hold' };
/** `job.reject` then `agent.status`, as the stock agent when busy or draining. */
export type RejectScript = { kind: 'reject'; reason: 'busy' | 'draining' };
/** No answer at all, as the stock agent with a dispatch failing its own schema. */
export type SilentScript = { kind: 'silent' };

/** The scripts that run a job (the others answer without one). */
export type RunnableScript = StepsScript | InitScript | HoldScript;

/** Decides the answer to each dispatch. */
export type ScriptFor = (dispatch: JobDispatch) => JobScript;

/** The steps the agent reports for a dispatch: parallel groups' children in order; an init job has one, `init`. */
export function stepsOf(dispatch: JobDispatch): { index: number; name: string }[] {
  if (dispatch.jobConfig.initOnly === true) return [{ index: 0, name: 'init' }];
  const names = (dispatch.jobConfig.steps ?? []).flatMap((step) => (step.kind === 'parallel' ? step.children.map((child) => child.name) : [step.name]));
  return names.map((name, index) => ({ index, name }));
}

export interface SucceedOptions {
  /** `data.outputs` of the successful `job.status`, e.g. `{make: {version: "1.2.3"}}`. */
  outputs?: Record<string, unknown>;
  /** Log lines per step name. */
  logs?: Record<string, string[]>;
}

/** Every step succeeds. */
export function succeed(dispatch: JobDispatch, options: SucceedOptions = {}): StepsScript {
  const steps = stepsOf(dispatch).map((step) => ({ ...step, outcome: 'success' as const, lines: options.logs?.[step.name] ?? [] }));
  return { kind: 'steps', steps, ...(options.outputs && { outputs: options.outputs }) };
}

export interface FailOptions {
  /** @default 1 */
  exitCode?: number;
  /** The thrown message; the stock agent appends the stack line and `exit code: N`. @default '' */
  message?: string;
  /**
   * What happens to the steps after the failed one. The recording has only one-step jobs; the stock
   * agent stops at a failing step, so they are not reported by default. @default 'omit'
   */
  laterSteps?: 'omit' | 'skipped';
  logs?: Record<string, string[]>;
}

/** Steps before `stepName` succeed, `stepName` fails; the job ends `failed`. */
export function failAt(dispatch: JobDispatch, stepName: string, options: FailOptions = {}): StepsScript {
  const all = stepsOf(dispatch);
  const at = all.findIndex((step) => step.name === stepName);
  if (at < 0) throw new Error(`failAt: the dispatch has no step "${stepName}" (steps: ${all.map((s) => s.name).join(', ')})`);
  const error = { message: options.message ?? '', exitCode: options.exitCode ?? 1 };
  const steps: StepPlan[] = [];
  for (const step of all) {
    const lines = options.logs?.[step.name] ?? [];
    if (step.index < at) steps.push({ ...step, outcome: 'success', lines });
    else if (step.index === at) steps.push({ ...step, outcome: 'failed', lines, error });
    else if (options.laterSteps === 'skipped') steps.push({ ...step, outcome: 'skipped', lines: [] });
  }
  return { kind: 'steps', steps };
}

/** An init job that computed `initResult`. */
export function initSuccess(initResult: InitResult = {}, lines: string[] = []): InitScript {
  return { kind: 'init', lines, result: { ok: true, initResult } };
}

/** An init job whose evaluation threw `error`. */
export function initFailure(error: string, lines: string[] = []): InitScript {
  return { kind: 'init', lines, result: { ok: false, error } };
}

export function hold(): HoldScript {
  return { kind: 'hold' };
}

export function reject(reason: 'busy' | 'draining' = 'busy'): RejectScript {
  return { kind: 'reject', reason };
}

export function silent(): SilentScript {
  return { kind: 'silent' };
}

/** Every job succeeds; an init job answers with `initResult`. */
export function succeedAll(initResult: InitResult = {}): ScriptFor {
  return (dispatch) => (dispatch.jobConfig.initOnly === true ? initSuccess(initResult) : succeed(dispatch));
}
