import type { JobStatusData, StepResult } from '../../machines/job.events.ts';
import type { JobStatus } from '../../machines/status.ts';
import type { InitResult, StepRecord } from '../../machines/types.ts';
import { redactDeep, redactSecrets } from '../security/redact.ts';
import type { AgentMessageOf } from './messages.ts';

/** Step outputs a job may hand downstream; more is refused with a reason rather than stored. */
export const MAX_OUTPUT_BYTES = 1024 * 1024;

/** Masks secret values in a text the agent sent; the default knows no values and masks agent tokens only. */
export type Redact = (text: string) => string;
const tokensOnly: Redact = (text) => redactSecrets(text, []);

/** `step.status` as the job actor records it; error texts are redacted with the attempt's secret values (SEC-4). */
export function stepRecordOf(message: AgentMessageOf<'step.status'>, redact: Redact = tokensOnly): StepRecord {
  const error = message.data?.error;
  return {
    index: message.stepIndex,
    name: message.stepName,
    status: message.state,
    hook: message.step_type ?? null,
    durationMs: message.data?.durationMs ?? null,
    exitCode: error?.exitCode ?? null,
    error: error ? redact(signalled(error.message, error.signal)) : null,
  };
}

/** The job's implicit first step: the agent's own work before the lock file's steps (its `log.chunk`s of step -1). */
export const RUNNER_STEP_INDEX = -1;
export const RUNNER_STEP_NAME = 'runner';

/**
 * The runner step as the agent's checkout `run.event`s tell it: `agent.clone.start` → running,
 * `agent.clone.end` → its duration, failed when its metadata says `success: false` (the reference
 * agent's; the stock agent sends none). Other run events are not steps: null.
 */
export function runnerStepOf(message: AgentMessageOf<'run.event'>): StepRecord | null {
  const base = { index: RUNNER_STEP_INDEX, name: RUNNER_STEP_NAME, hook: null, exitCode: null };
  if (message.eventType === 'agent.clone.start') return { ...base, status: 'running', durationMs: null, error: null };
  if (message.eventType !== 'agent.clone.end') return null;
  const failed = message.metadata?.['success'] === false;
  return { ...base, status: failed ? 'failed' : 'success', durationMs: message.durationMs ?? null, error: failed ? 'checkout failed' : null };
}

function signalled(message: string, signal: string | null | undefined): string {
  return signal ? `${message} (signal ${signal})` : message;
}

export interface JobStatusReport {
  state: JobStatus;
  error?: string;
  data?: JobStatusData;
}

/**
 * A `job.status` as the job actor takes it. An init job that reports `initFailed` failed whatever
 * its state says (docs/lockfile.md#init-jobs), and outputs over the limit fail the job instead of being kept.
 */
export function jobStatusReportOf(message: AgentMessageOf<'job.status'>, redact: Redact = tokensOnly): JobStatusReport {
  const wire = message.data;
  const error = wire?.error === undefined ? undefined : redact(wire.error);
  if (wire === undefined) return { state: message.state };
  const data: JobStatusData = {
    ...(wire.durationMs !== undefined && { durationMs: wire.durationMs }),
    ...(wire.stepResults !== undefined && { stepResults: wire.stepResults.map((result) => redactStepResult(result, redact)) }),
  };
  if (wire.initFailed !== undefined && wire.initFailed !== false) {
    return { state: 'failed', error: error ?? 'the init job failed without a message', data };
  }
  const initResult = wire.initComplete === true || wire.initResult !== undefined ? initResultOf(wire.initResult) : undefined;
  if (typeof initResult === 'string') return { state: 'failed', error: initResult, data };
  if (initResult !== undefined) data.initResult = initResult;
  const outputs = wire.outputs;
  if (outputs !== undefined) {
    const bytes = Buffer.byteLength(JSON.stringify(outputs), 'utf8');
    if (bytes > MAX_OUTPUT_BYTES) {
      return { state: 'failed', error: `job outputs are ${bytes} bytes; the limit is ${MAX_OUTPUT_BYTES} bytes`, data };
    }
    // Outputs land in the snapshot and downstream dispatches: a secret value in one is masked (secret outputs carry secrets).
    data.outputs = redactDeep(outputs, redact) as Record<string, unknown>;
  }
  return { state: message.state, ...(error !== undefined && { error }), data };
}

function redactStepResult(result: StepResult, redact: Redact): StepResult {
  return result.error === undefined ? result : { ...result, error: redact(result.error) };
}

/** The init result with every value checked, or why it cannot be used (a string). */
function initResultOf(raw: unknown): InitResult | string {
  if (raw === undefined || raw === null) return {};
  if (typeof raw !== 'object' || Array.isArray(raw)) return 'initResult is not an object';
  const fields = raw as Record<string, unknown>;
  const result: InitResult = {};
  const names = fields['environmentNames'] ?? fields['contextNames'];
  if (names !== undefined) {
    if (!Array.isArray(names) || !names.every((n) => typeof n === 'string')) return 'initResult.environmentNames is not a list of strings';
    result.environmentNames = names;
  }
  if (fields['env'] !== undefined) {
    const env = stringMap(fields['env']);
    if (env === null) return 'initResult.env is not a map of strings';
    result.env = env;
  }
  if (fields['concurrencyGroup'] !== undefined) {
    if (typeof fields['concurrencyGroup'] !== 'string') return 'initResult.concurrencyGroup is not a string';
    result.concurrencyGroup = fields['concurrencyGroup'];
  }
  if (fields['matrixValues'] !== undefined) {
    const combos = combinations(fields['matrixValues']);
    if (typeof combos === 'string') return combos;
    result.matrixValues = combos;
  }
  return result;
}

function stringMap(value: unknown): Record<string, string> | null {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return null;
  const entries = Object.entries(value);
  return entries.every(([, v]) => typeof v === 'string') ? Object.fromEntries(entries) : null;
}

/** Matrix combinations with scalar values, as text (a scalar combination `v` is `{value: v}`). */
function combinations(value: unknown): Record<string, string>[] | string {
  if (!Array.isArray(value)) return 'initResult.matrixValues is not a list of combinations';
  const out: Record<string, string>[] = [];
  for (const entry of value as unknown[]) {
    if (isScalar(entry)) {
      out.push({ value: String(entry) });
      continue;
    }
    if (typeof entry !== 'object' || entry === null || Array.isArray(entry)) return 'initResult.matrixValues holds a combination that is not an object';
    const pairs = Object.entries(entry);
    if (!pairs.every(([, v]) => isScalar(v))) return 'initResult.matrixValues holds a value that is not a string, number or boolean';
    out.push(Object.fromEntries(pairs.map(([k, v]) => [k, String(v)])));
  }
  return out;
}

function isScalar(value: unknown): value is string | number | boolean {
  return typeof value === 'string' || typeof value === 'number' || typeof value === 'boolean';
}
