import { randomUUID } from 'node:crypto';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from 'pino';
import type { AgentTerminalJobState, JobDispatch, JobStatusMessage, RunEventType } from '../ws/messages.ts';
import { checkoutRepository, CheckoutError } from './checkout.ts';
import { contextEnvVars, type Env } from './environment.ts';
import { logChunk, reportNotRun, type JobChannel, type JobScope, type StepOutcome } from './job-scope.ts';
import { LogStream, type LogStreamOptions } from './log-stream.ts';
import { dispatchSecretValues, SecretMasker } from './masking.ts';
import { runGroup } from './parallel.ts';
import { planSteps, stepsOf } from './plan.ts';
import { runInProcessGroup, signalGroup, type StopRequest } from './process-group.ts';
import { runStep } from './step-runner.ts';

export interface JobRunnerOptions {
  workDir: string;
  jobHeartbeatMs: number;
  log: Omit<LogStreamOptions, 'maxBytes'>;
  labels: readonly string[];
  /** Masked in logs and context like a dispatched secret. */
  agentToken: string | undefined;
}

export interface JobRunnerResources {
  channel: JobChannel;
  log: Logger;
  baseEnv: Env;
}

/** `gracePeriod` default of docs/lockfile.md#jobs, in seconds. */
const DEFAULT_GRACE_SECONDS = 30;
const DEFAULT_MAX_LOG_BYTES = 10 * 1024 * 1024;

export type JobPhase = 'starting' | 'checkout' | 'steps' | 'teardown' | 'finished';

/** One dispatched job from `job.ack` to its terminal `job.status` (docs/protocol.md#the-job-from-the-agents-side). */
export class JobRunner {
  private readonly stop = new AbortController();
  private readonly processGroups = new Set<number>();
  private readonly masker: SecretMasker;
  private readonly runnerLog: LogStream;
  private readonly startedAt = Date.now();
  private phase: JobPhase = 'starting';
  private readonly log: Logger;

  constructor(
    readonly dispatch: JobDispatch,
    private readonly options: JobRunnerOptions,
    private readonly resources: JobRunnerResources,
  ) {
    this.log = resources.log.child({ runId: dispatch.runId, jobId: dispatch.jobId });
    const values = dispatchSecretValues(dispatch);
    if (options.agentToken !== undefined) values.push(options.agentToken);
    this.masker = new SecretMasker(values);
    this.runnerLog = new LogStream(this.logOptions(), this.masker, (lines, at) =>
      resources.channel.buffered(logChunk(dispatch, -1, lines, at)),
    );
  }

  /** Stops the job: graceful first, SIGKILL at once when `force`, even after a graceful stop. */
  requestStop(request: StopRequest): void {
    if (!this.stop.signal.aborted) {
      this.log.info({ kind: request.kind, force: request.force, phase: this.phase }, 'job stop requested');
      this.stop.abort(request);
    } else if (request.force) {
      for (const pgid of this.processGroups) signalGroup(pgid, 'SIGKILL');
    }
  }

  /** Runs the job; resolves with the terminal status once it has been handed to the channel. */
  async run(): Promise<JobStatusMessage> {
    const { channel } = this.resources;
    channel.direct({ type: 'job.ack', ...this.ids(), messageId: randomUUID(), timestamp: Date.now() });
    channel.direct({ type: 'job.status', ...this.ids(), messageId: randomUUID(), state: 'running', timestamp: Date.now() });
    const heartbeat = setInterval(
      () => channel.buffered({ type: 'job.heartbeat', ...this.ids(), timestamp: Date.now() }),
      this.options.jobHeartbeatMs,
    );
    const timeoutMs = this.dispatch.jobConfig.timeout;
    const deadline =
      timeoutMs === undefined
        ? undefined
        : setTimeout(() => this.requestStop({ kind: 'job_timeout', force: false, message: 'job_timeout' }), timeoutMs);
    try {
      const status = await this.execute().catch((thrown: unknown) => this.crashed(thrown));
      channel.terminal(status);
      return status;
    } finally {
      clearInterval(heartbeat);
      clearTimeout(deadline);
      this.phase = 'finished';
    }
  }

  private async execute(): Promise<JobStatusMessage> {
    const workspace = await mkdtemp(join(this.options.workDir, `job-${this.dispatch.jobId.slice(0, 8)}-`));
    const checkoutDir = join(workspace, 'src');
    try {
      const failure = await this.prepare(workspace, checkoutDir);
      const scope = this.scope(checkoutDir);
      const outcomes = failure === undefined ? await this.runSteps(scope) : this.skipAll(scope);
      await this.teardown(workspace);
      return this.terminalStatus(failure, outcomes);
    } catch (thrown: unknown) {
      await this.teardown(workspace);
      throw thrown;
    }
  }

  /** Checkout and context; returns why the job cannot run its steps, if it cannot. */
  private async prepare(workspace: string, checkoutDir: string): Promise<string | undefined> {
    this.phase = 'checkout';
    const started = Date.now();
    this.runEvent('agent.clone.start', null);
    let failure: string | undefined;
    try {
      if (this.dispatch.jobConfig.checkout === false) await mkdir(checkoutDir);
      else await this.checkout(workspace, checkoutDir);
    } catch (thrown: unknown) {
      if (!(thrown instanceof CheckoutError)) throw thrown;
      failure = `checkout failed: ${thrown.message}`;
      this.runnerLog.push(`[switchyard] ${failure}`);
    }
    this.runEvent('agent.clone.end', Date.now() - started, { success: failure === undefined });
    // The checkout lines go out before any step's, instead of after the batch delay.
    this.runnerLog.flush();
    this.sendContext(checkoutDir);
    return failure;
  }

  private async checkout(workspace: string, checkoutDir: string): Promise<void> {
    const { repoUrl, ref, sha } = this.dispatch;
    this.runnerLog.push(`[switchyard] cloning ${this.masker.mask(repoUrl)} at ${ref} (${sha})`);
    await checkoutRepository({
      dispatch: this.dispatch,
      targetDir: checkoutDir,
      authDir: join(workspace, 'auth'),
      baseEnv: this.resources.baseEnv,
      git: (args, cwd, env, onLine) =>
        runInProcessGroup({
          argv: ['git', ...args],
          cwd,
          env,
          signal: this.stop.signal,
          graceMs: this.graceMs(),
          onLine: onLine ?? ((line) => this.runnerLog.push(line)),
          onSpawn: (pgid) => this.processGroups.add(pgid),
        }),
    });
    if (this.stop.signal.aborted) throw new CheckoutError('interrupted');
  }

  private async runSteps(scope: JobScope): Promise<StepOutcome[]> {
    this.phase = 'steps';
    const started = Date.now();
    this.runEvent('agent.execution.start', null);
    const outcomes: StepOutcome[] = [];
    let halted = false;
    for (const item of planSteps(this.dispatch.jobConfig.steps ?? [])) {
      if (halted || this.stop.signal.aborted) {
        outcomes.push(...stepsOf(item).map((planned) => reportNotRun(scope, planned, 'skipped')));
        continue;
      }
      const results =
        item.kind === 'single' ? [await runStep(scope, item.step, this.stop.signal)] : await runGroup(scope, item, this.stop.signal);
      outcomes.push(...results);
      halted = results.some((r) => r.state === 'cancelled' || (r.state === 'failed' && !r.continueOnError));
    }
    this.runEvent('agent.execution.end', Date.now() - started, { steps: outcomes.length });
    return outcomes;
  }

  private skipAll(scope: JobScope): StepOutcome[] {
    const steps = planSteps(this.dispatch.jobConfig.steps ?? []).flatMap(stepsOf);
    return steps.map((planned) => reportNotRun(scope, planned, 'skipped'));
  }

  /** Kills what the steps left running, removes the workspace. */
  private async teardown(workspace: string): Promise<void> {
    this.phase = 'teardown';
    for (const pgid of this.processGroups) signalGroup(pgid, 'SIGKILL');
    this.runnerLog.close();
    await rm(workspace, { recursive: true, force: true, maxRetries: 3 }).catch((error: unknown) =>
      this.log.warn({ err: error, workspace }, 'workspace cleanup failed'),
    );
    this.runEvent('agent.teardown', null);
  }

  private terminalStatus(failure: string | undefined, outcomes: StepOutcome[]): JobStatusMessage {
    const stopRequest = this.stop.signal.aborted ? (this.stop.signal.reason as StopRequest) : undefined;
    const failedStep = outcomes.find((o) => o.state === 'failed' && !o.continueOnError);
    let state: AgentTerminalJobState = 'success';
    let error: string | undefined;
    if (stopRequest !== undefined) {
      state = stopRequest.kind === 'job_timeout' ? 'failed' : 'cancelled';
      error = stopRequest.message;
    } else if (failure !== undefined || failedStep !== undefined) {
      state = 'failed';
      error = failure ?? `step ${failedStep?.name} failed: ${failedStep?.error?.message ?? 'unknown error'}`;
    }
    const stepResults = outcomes.map((o) => ({
      name: o.name,
      status: o.state,
      durationMs: o.durationMs,
      ...(o.error && { error: o.error.message }),
    }));
    return {
      type: 'job.status',
      ...this.ids(),
      messageId: randomUUID(),
      state,
      timestamp: Date.now(),
      data: { durationMs: Date.now() - this.startedAt, ...(error !== undefined && { error }), stepResults },
    };
  }

  /** An unexpected agent-side failure still ends the job with a status the coordinator can act on. */
  private crashed(thrown: unknown): JobStatusMessage {
    const message = thrown instanceof Error ? thrown.message : String(thrown);
    this.log.error({ err: thrown }, 'job crashed');
    return {
      type: 'job.status',
      ...this.ids(),
      messageId: randomUUID(),
      state: 'failed',
      timestamp: Date.now(),
      data: { durationMs: Date.now() - this.startedAt, error: `agent error: ${message}`, stepResults: [] },
    };
  }

  private sendContext(checkoutDir: string): void {
    this.resources.channel.direct({
      type: 'job.context',
      ...this.ids(),
      context: {
        envVars: contextEnvVars(this.resources.baseEnv, this.dispatch, this.masker),
        runtime: { nodeVersion: process.version, os: process.platform, arch: process.arch },
        sandboxType: 'none',
        labels: [...this.options.labels],
        workingDirectory: checkoutDir,
        gitRef: this.dispatch.ref,
      },
    });
  }

  private runEvent(eventType: RunEventType, durationMs: number | null, metadata?: Record<string, unknown>): void {
    this.resources.channel.direct({
      type: 'run.event',
      runId: this.dispatch.runId,
      jobId: this.dispatch.jobId,
      eventType,
      timestampMs: Date.now(),
      sourceService: 'agent',
      durationMs,
      ...(metadata && { metadata }),
    });
  }

  private scope(checkoutDir: string): JobScope {
    return {
      dispatch: this.dispatch,
      channel: this.resources.channel,
      masker: this.masker,
      baseEnv: this.resources.baseEnv,
      checkoutDir,
      graceMs: this.graceMs(),
      logOptions: this.logOptions(),
      trackProcessGroup: (pgid) => this.processGroups.add(pgid),
    };
  }

  private ids() {
    return { runId: this.dispatch.runId, jobId: this.dispatch.jobId };
  }

  private graceMs(): number {
    return (this.dispatch.jobConfig.gracePeriod ?? DEFAULT_GRACE_SECONDS) * 1000;
  }

  private logOptions(): LogStreamOptions {
    return { ...this.options.log, maxBytes: this.dispatch.maxLogSizeBytes ?? DEFAULT_MAX_LOG_BYTES };
  }
}
