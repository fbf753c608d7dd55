import { randomUUID } from 'node:crypto';
import { stat } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { RetryPolicy, StepError, TerminalStepState } from '../ws/messages.ts';
import { stepEnv } from './environment.ts';
import { logChunk, sendStepStatus, type JobScope, type PlannedStep, type StepOutcome } from './job-scope.ts';
import { LogStream } from './log-stream.ts';
import { runInProcessGroup, type ProcessResult, type StopRequest } from './process-group.ts';
import { shellArgv } from './shell.ts';
import { backoffMs } from '../../lib/backoff.ts';

interface Verdict {
  state: TerminalStepState;
  error?: StepError;
}

/** Runs one step to its end and reports `running` then its terminal `step.status`. */
export async function runStep(scope: JobScope, planned: PlannedStep, signal: AbortSignal): Promise<StepOutcome> {
  const started = Date.now();
  sendStepStatus(scope, planned, 'running');
  const logs = new LogStream(scope.logOptions, scope.masker, (lines, at) =>
    scope.channel.buffered(logChunk(scope.dispatch, planned.index, lines, at)),
  );
  const verdict = await execute(scope, planned, signal, logs);
  logs.close();
  const durationMs = Date.now() - started;
  sendStepStatus(scope, planned, verdict.state, { durationMs, ...(verdict.error && { error: verdict.error }) });
  return {
    index: planned.index,
    name: planned.step.name,
    state: verdict.state,
    durationMs,
    continueOnError: planned.step.continueOnError === true,
    ...(verdict.error && { error: verdict.error }),
  };
}

async function execute(scope: JobScope, planned: PlannedStep, signal: AbortSignal, logs: LogStream): Promise<Verdict> {
  const { step } = planned;
  if (step.run === undefined) return { state: 'failed', error: { message: 'this agent executes only run steps' } };
  if (step.approval?.when === 'always') {
    const outcome = await awaitApproval(scope, planned, signal);
    if (outcome !== 'approved') return stopped(signal) ?? { state: 'failed', error: { message: `approval ${outcome}` } };
  }
  const cwd = join(scope.checkoutDir, step.workingDirectory ?? '.');
  if (!(await isDirectory(cwd))) {
    return { state: 'failed', error: { message: `working directory not found: ${step.workingDirectory ?? '.'}` } };
  }
  const env = stepEnv(scope.baseEnv, scope.dispatch, step);
  const argv = shellArgv(step.run, step.shell, env.PATH);
  const attempts = step.retry?.maxAttempts ?? 1;
  for (let attempt = 1; ; attempt += 1) {
    const result = await runInProcessGroup({
      argv,
      cwd,
      env,
      signal,
      graceMs: scope.graceMs,
      onLine: (line) => logs.push(line),
      onSpawn: (pgid) => scope.trackProcessGroup(pgid),
      ...(step.timeout !== undefined && { timeoutMs: step.timeout }),
    });
    const verdict = judge(result, argv[0], signal);
    if (verdict.state !== 'failed' || signal.aborted || attempt >= attempts || step.retry === undefined) return verdict;
    const delayMs = retryDelayMs(step.retry, attempt);
    logs.push(`[switchyard] attempt ${attempt} of ${attempts} failed (${verdict.error?.message}); retrying in ${delayMs} ms`);
    const interrupted = await sleep(delayMs, undefined, { signal }).then(
      () => false,
      () => true,
    );
    if (interrupted) return stopped(signal) ?? verdict;
  }
}

function judge(result: ProcessResult, shell: string, signal: AbortSignal): Verdict {
  if (result.exitCode === 0) return { state: 'success' };
  const stop = stopped(signal, result);
  if (stop !== undefined) return stop;
  if (result.spawnError !== undefined) {
    return { state: 'failed', error: { message: `could not start ${shell}: ${result.spawnError}` } };
  }
  const codes = { exitCode: result.exitCode, signal: result.signal };
  if (result.timedOut) return { state: 'failed', error: { message: 'step timeout', ...codes } };
  if (result.signal !== null) return { state: 'failed', error: { message: `killed by ${result.signal}`, signal: result.signal } };
  return { state: 'failed', error: { message: `exit code ${String(result.exitCode)}`, exitCode: result.exitCode } };
}

/** The verdict of a step interrupted by a job-level stop: a job timeout fails it, anything else cancels it. */
function stopped(signal: AbortSignal, result?: ProcessResult): Verdict | undefined {
  if (!signal.aborted) return undefined;
  const request = signal.reason as StopRequest;
  const error: StepError = { message: request.message, ...(result?.signal && { signal: result.signal }) };
  return { state: request.kind === 'job_timeout' ? 'failed' : 'cancelled', error };
}

export function retryDelayMs(retry: RetryPolicy, attempt: number): number {
  const policy = { baseMs: retry.delayMs, maxMs: retry.maxDelayMs ?? Infinity, factor: retry.backoff === 'exponential' ? 2 : 1 };
  return backoffMs(attempt, policy);
}

async function awaitApproval(scope: JobScope, planned: PlannedStep, signal: AbortSignal) {
  const { runId, jobId } = scope.dispatch;
  const approval = planned.step.approval;
  const request = scope.channel.requestApproval({
    type: 'step.approval-request',
    messageId: randomUUID(),
    runId,
    jobId,
    stepIndex: planned.index,
    stepName: planned.step.name,
    clauses: approval?.clauses ?? [],
    reason: approval?.reason ?? `approve step ${planned.step.name}`,
    ...(approval?.timeoutSeconds !== undefined && { timeoutSeconds: approval.timeoutSeconds }),
  });
  const aborted = new Promise<'rejected'>((resolve) => {
    if (signal.aborted) resolve('rejected');
    signal.addEventListener('abort', () => resolve('rejected'), { once: true });
  });
  return Promise.race([request, aborted]);
}

async function isDirectory(path: string): Promise<boolean> {
  return stat(path).then(
    (stats) => stats.isDirectory(),
    () => false,
  );
}
