import type { StepResult } from './job.events.ts';
import { STEP_STATES } from './types.ts';
import type { StepRecord, StepState } from './types.ts';

/** A reason is one readable line; stack traces and long messages are cut here. */
const MAX_REASON_CHARS = 500;

/** The step list with `step` put in its place by index (a later report for the same index wins). */
export function upsertStep(steps: readonly StepRecord[], step: StepRecord): StepRecord[] {
  const others = steps.filter((s) => s.index !== step.index);
  const previous = steps.find((s) => s.index === step.index);
  // A terminal report often omits what the running report said; keep what is known.
  const merged: StepRecord = previous ? { ...previous, ...definedFields(step) } : step;
  return [...others, merged].sort((a, b) => a.index - b.index);
}

function definedFields(step: StepRecord): Partial<StepRecord> {
  return Object.fromEntries(Object.entries(step).filter(([, value]) => value !== null));
}

/**
 * Folds the terminal `stepResults` into the step records: a step the agent never reported on its
 * own (its `step.status` was lost, or never sent) still shows with its status, duration and error.
 */
export function mergeStepResults(steps: readonly StepRecord[], results: readonly StepResult[] | undefined): StepRecord[] {
  if (!results || results.length === 0) return [...steps];
  let merged = [...steps];
  let next = steps.reduce((max, s) => Math.max(max, s.index + 1), 0);
  for (const result of results) {
    // The runner step (index -1) is the agent's own, never one of the lock file's steps, whatever its name.
    const known = merged.find((s) => s.index >= 0 && s.name === result.name && s.hook === null);
    const status = asStepState(result.status) ?? known?.status ?? 'success';
    const record: StepRecord = {
      index: known?.index ?? next++,
      name: result.name,
      status,
      hook: null,
      durationMs: result.durationMs,
      exitCode: known?.exitCode ?? null,
      error: result.error ?? known?.error ?? null,
    };
    merged = upsertStep(merged, record);
  }
  return merged;
}

function asStepState(value: string): StepState | null {
  return (STEP_STATES as readonly string[]).includes(value) ? (value as StepState) : null;
}

/** A job that ended otherwise than green stopped its steps that were still running: they show `cancelled`, not `running` forever. */
export function interruptSteps(steps: readonly StepRecord[]): StepRecord[] {
  if (!steps.some((s) => s.status === 'running')) return [...steps];
  return steps.map((s) => (s.status === 'running' ? { ...s, status: 'cancelled' as const } : s));
}

/** Why a job failed, in one line: the agent's own error, else the first failed step's. */
export function failureReasonOf(error: string | undefined, steps: readonly StepRecord[]): string | null {
  if (error !== undefined && error.trim() !== '') return oneLine(error);
  const failed = steps.find((s) => s.status === 'failed');
  if (!failed) return null;
  const code = failed.exitCode !== null ? ` (exit code ${failed.exitCode})` : '';
  const detail = failed.error ? `: ${failed.error}` : '';
  return oneLine(`step ${failed.name} failed${code}${detail}`);
}

function oneLine(text: string): string {
  const flat = text.replace(/\s+/g, ' ').trim();
  return flat.length <= MAX_REASON_CHARS ? flat : `${flat.slice(0, MAX_REASON_CHARS - 1)}…`;
}
