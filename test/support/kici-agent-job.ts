import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { JobDispatch } from '../../src/ws/messages.ts';
import type { KiciFrames, StepOutcome } from './kici-agent-frames.ts';
import type { InitScript, JobScript, RunnableScript, StepPlan } from './kici-agent-scripts.ts';
import { succeed, initSuccess } from './kici-agent-scripts.ts';
import type { WireFrame } from './kici-wire-fixture.ts';

export type JobEnd = 'success' | 'failed' | 'cancelled';

/** The agent's two send paths (protocol.md §10.1) and its own log. */
export interface JobChannel {
  /** Written if the socket is open, dropped otherwise. */
  direct(frame: WireFrame): void;
  /** `log.chunk` and `job.heartbeat`: written while registered, else kept and replayed. */
  buffered(frame: WireFrame): void;
  agentLog(line: string): void;
  ended(run: JobRun, end: JobEnd): void;
}

export interface JobRunOptions {
  /** Gap before each frame. */
  paceMs: number;
  /** `job.heartbeat` period from `running` to the end; 0 sends none. */
  jobHeartbeatMs: number;
}

/** Thrown between frames once the job is cancelled or the agent stops. */
class Interrupted extends Error {
  override readonly name = 'Interrupted';
}

/**
 * One job as the stock agent runs it, frame by frame in the recorded order: ack, running, context,
 * clone events when it must clone, execution, steps, logs, terminal status, teardown.
 */
export class JobRun {
  readonly workDir = join(tmpdir(), `kici-${randomBytes(4).toString('base64url').slice(0, 6)}`);
  private phase: 'running' | 'held' | 'ended' = 'running';
  private cancelled: { reason: string; force: boolean } | null = null;
  private stopped = false;
  private release: ((script: RunnableScript) => void) | null = null;
  private heartbeat: NodeJS.Timeout | undefined;
  private readonly startedAt = Date.now();
  private executionStartedAt: number | null = null;
  private readonly results: { name: string; status: string; durationMs: number; error?: string }[] = [];

  constructor(
    readonly dispatch: JobDispatch,
    private readonly script: RunnableScript,
    private readonly frames: KiciFrames,
    private readonly channel: JobChannel,
    private readonly options: JobRunOptions,
  ) {}

  get jobId(): string {
    return this.dispatch.jobId;
  }

  get runId(): string {
    return this.dispatch.runId;
  }

  get state(): 'running' | 'held' | 'ended' {
    return this.phase;
  }

  /** Runs the script to its end; resolves once the terminal `job.status` is out (or the agent stopped). */
  async run(): Promise<void> {
    try {
      await this.opening();
      let script = this.script;
      if (script.kind === 'hold') script = await this.held();
      if (script.kind === 'init') await this.runInit(script);
      else if (script.kind === 'steps') await this.runSteps(script.steps, script.outputs);
    } catch (thrown: unknown) {
      if (!(thrown instanceof Interrupted)) throw thrown;
      if (!this.stopped) await this.cancelTail();
    } finally {
      clearInterval(this.heartbeat);
    }
  }

  /** Ends a held job with `script` (default: success of every step, or an empty init result). */
  finish(script?: JobScript): boolean {
    if (this.phase !== 'held' || this.release === null) return false;
    const next = script ?? (this.dispatch.jobConfig.initOnly === true ? initSuccess() : succeed(this.dispatch));
    if (next.kind === 'reject' || next.kind === 'silent' || next.kind === 'hold') throw new Error(`finish: a ${next.kind} script cannot end a running job`);
    this.release(next);
    return true;
  }

  /** `job.cancel`: the job stops between frames and reports `cancelled` (protocol.md §13.1). */
  cancel(reason: string, force: boolean): void {
    if (this.phase === 'ended' || this.cancelled) return;
    this.cancelled = { reason, force };
    this.release?.({ kind: 'hold' });
  }

  /** The agent is going away: no more frames, no terminal status. */
  stop(): void {
    this.stopped = true;
    clearInterval(this.heartbeat);
    this.release?.({ kind: 'hold' });
  }

  private async pace(): Promise<void> {
    if (this.options.paceMs > 0) await sleep(this.options.paceMs);
    else await Promise.resolve();
    if (this.cancelled || this.stopped) throw new Interrupted('job interrupted');
  }

  private async send(frame: WireFrame, path: 'direct' | 'buffered' = 'direct'): Promise<void> {
    await this.pace();
    this.channel[path](frame);
  }

  private async opening(): Promise<void> {
    const d = this.dispatch;
    this.channel.direct(this.frames.jobAck(d));
    await this.send(this.frames.jobRunning(d));
    if (this.options.jobHeartbeatMs > 0) {
      this.heartbeat = setInterval(() => this.channel.buffered(this.frames.jobHeartbeat(d)), this.options.jobHeartbeatMs).unref();
    }
    await this.send(this.frames.jobContext(d, this.workDir));
    // The recording shows clone events only where the agent itself clones: no source tarball was offered.
    if (d.sourceTarUrl === undefined) {
      const cloneStart = Date.now();
      await this.send(this.frames.runEvent(d, 'agent.clone.start', null));
      await this.send(this.frames.runEvent(d, 'agent.clone.end', Date.now() - cloneStart));
    }
    await this.send(this.frames.runEvent(d, 'agent.execution.start', null));
    this.executionStartedAt = Date.now();
    await this.pace();
    this.channel.agentLog(this.frames.logLine('Accepting job dispatch', { activeJobs: 1, jobId: d.jobId, requestId: d.requestId, runId: d.runId }));
  }

  private held(): Promise<RunnableScript> {
    this.phase = 'held';
    return new Promise((resolve, reject) => {
      this.release = (script) => {
        this.release = null;
        this.phase = 'running';
        if (this.cancelled || this.stopped) reject(new Interrupted('job interrupted while held'));
        else resolve(script);
      };
    });
  }

  private runnerLines(): string[] {
    const d = this.dispatch;
    return [
      `[workflow-runner] Cloning ${d.repoUrl} ref=${d.ref} into ${this.workDir}`,
      '[workflow-runner] Clone complete',
      ...(d.sourceTarUrl === undefined ? [] : ['[workflow-runner] Restoring .kici/ source from cached tarball']),
      '[workflow-runner] Loading workflow module',
    ];
  }

  private async runSteps(steps: readonly StepPlan[], outputs: Record<string, unknown> | undefined): Promise<void> {
    await this.send(this.frames.logChunk(this.dispatch, -1, this.runnerLines()), 'buffered');
    for (const step of steps) await this.runStep(step, step.error && { message: this.stockErrorMessage(step), exitCode: step.error.exitCode });
    const failed = steps.some((step) => step.outcome === 'failed');
    await this.closing(steps, failed ? 'failed' : 'success', {
      durationMs: Date.now() - this.startedAt,
      ...(!failed && outputs && Object.keys(outputs).length > 0 && { outputs }),
      stepResults: this.results,
    });
  }

  private async runInit(script: InitScript): Promise<void> {
    await this.send(this.frames.logChunk(this.dispatch, -1, this.runnerLines()), 'buffered');
    const { result } = script;
    const step: StepPlan = { index: 0, name: 'init', outcome: result.ok ? 'success' : 'failed', lines: script.lines };
    await this.runStep(step, result.ok ? undefined : { message: result.error });
    const data = result.ok ? { initComplete: true, initResult: result.initResult } : { error: result.error, initFailed: true };
    await this.closing([step], result.ok ? 'success' : 'failed', data);
  }

  private async runStep(step: StepPlan, error: { message: string; exitCode?: number } | undefined): Promise<void> {
    const d = this.dispatch;
    const logBytes = step.lines.reduce((sum, line) => sum + Buffer.byteLength(line), 0);
    if (step.outcome === 'skipped') {
      await this.send(this.frames.stepTerminal(d, { ...step, state: 'skipped', data: { durationMs: 0 }, logBytes: 0 }));
      this.results.push({ name: step.name, status: 'skipped', durationMs: 0 });
      return;
    }
    await this.send(this.frames.stepRunning(d, step.index, step.name));
    const started = Date.now();
    await this.pace();
    const durationMs = Date.now() - started;
    const state: StepOutcome = step.outcome;
    await this.send(this.frames.stepTerminal(d, { ...step, state, data: { durationMs, ...(error && { error }) }, logBytes }));
    this.results.push({ name: step.name, status: state, durationMs, ...(error && { error: error.message }) });
  }

  /** Execution end, the batched logs, the terminal status and teardown, as recorded. */
  private async closing(steps: readonly StepPlan[], end: 'success' | 'failed', data: Record<string, unknown>): Promise<void> {
    const d = this.dispatch;
    await this.send(this.frames.runEvent(d, 'agent.execution.end', this.sinceExecution(), end));
    await this.send(this.frames.logChunk(d, -1, ['[workflow-runner] Workflow module loaded']), 'buffered');
    for (const step of steps) if (step.lines.length > 0) await this.send(this.frames.logChunk(d, step.index, step.lines), 'buffered');
    await this.send(this.frames.jobTerminal(d, end, data));
    this.channel.direct(this.frames.runEvent(d, 'agent.teardown', null));
    this.end(end);
  }

  private async cancelTail(): Promise<void> {
    const d = this.dispatch;
    if (this.executionStartedAt !== null) this.channel.direct(this.frames.runEvent(d, 'agent.execution.end', this.sinceExecution(), 'cancelled'));
    await sleep(this.options.paceMs);
    this.channel.direct(this.frames.jobTerminal(d, 'cancelled', { durationMs: Date.now() - this.startedAt, stepResults: this.results }));
    this.channel.direct(this.frames.runEvent(d, 'agent.teardown', null));
    this.end('cancelled');
  }

  private end(end: JobEnd): void {
    this.phase = 'ended';
    clearInterval(this.heartbeat);
    this.channel.ended(this, end);
  }

  private sinceExecution(): number {
    return Date.now() - (this.executionStartedAt ?? this.startedAt);
  }

  /** `<message>\n    at Object.run (file://…/<workflow>.ts?t=…:L:C)\n    exit code: N`, as recorded. */
  private stockErrorMessage(step: StepPlan): string {
    const config = this.dispatch.jobConfig;
    const file = typeof config.source === 'object' ? config.source.file : (config.source ?? `.kici/workflows/${config.workflowName ?? 'workflow'}.ts`);
    const lock = config.steps?.flatMap((s) => (s.kind === 'parallel' ? s.children : [s])).find((s) => s.name === step.name);
    const where = lock?.sourceLocation ? `${lock.sourceLocation.line}:${lock.sourceLocation.column}` : '1:1';
    return `${step.error?.message ?? ''}\n    at Object.run (file://${this.workDir}/${file}?t=${Date.now()}:${where})\n    exit code: ${step.error?.exitCode ?? 1}`;
  }
}
