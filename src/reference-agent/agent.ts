import { randomUUID } from 'node:crypto';
import { mkdir } from 'node:fs/promises';
import { cpus, hostname, release, totalmem, userInfo, version as osVersion } from 'node:os';
import type { Logger } from 'pino';
import { z } from 'zod';
import {
  type AgentMessage,
  type AgentRegister,
  type ApprovalRequest,
  type InFlightJob,
  type JobDispatch,
  type OrchestratorMessage,
  type RegisterAck,
} from '../ws/messages.ts';
import { AgentConnection } from './connection.ts';
import { stepBaseEnv, type Env } from './environment.ts';
import type { ApprovalOutcome, JobChannel } from './job-scope.ts';
import { JobRunner } from './job-runner.ts';
import type { CompiledAgentOptions } from './options.ts';
import { Outbox, type ReplaySummary } from './outbox.ts';
import type { StopRequest } from './process-group.ts';

export const AGENT_VERSION = 'switchyard-agent/0.1.0';

/** Exit codes of `switchyard agent`. */
export const AGENT_EXIT = { OK: 0, USAGE: 2, AUTH_FAILED: 3 } as const;

export interface AgentResources {
  log: Logger;
  /** The agent process's environment; steps see it without `KICI_*` / `SWITCHYARD_*`. */
  env: NodeJS.ProcessEnv;
  random?: () => number;
}

/** `running` accepts jobs; `draining` and `stopping` only finish them (stopping has stopped them). */
export type AgentLifecycle = 'running' | 'draining' | 'stopping' | 'stopped';

const dispatchIds = z.object({ runId: z.string().min(1), jobId: z.string().min(1) });

/**
 * The reference agent (docs/protocol.md#labels-executors-and-matching): owns the job slots, the outbox and the connection, and
 * routes each orchestrator message to the job it concerns.
 */
export class Agent {
  private readonly jobs = new Map<string, JobRunner>();
  private readonly approvals = new Map<string, (outcome: ApprovalOutcome) => void>();
  private readonly connection: AgentConnection;
  private readonly outbox: Outbox;
  private readonly baseEnv: Env;
  private readonly startedAt = Date.now();
  private lifecycle: AgentLifecycle = 'running';
  private disconnectedAt: number | undefined;
  private registeredOnce = false;
  private jobsStarted = 0;
  private metrics: NodeJS.Timeout | undefined;
  private finalExitCode: number = AGENT_EXIT.OK;
  private resolveExit: (code: number) => void = () => undefined;
  private readonly log: Logger;

  constructor(
    private readonly options: CompiledAgentOptions,
    resources: AgentResources,
  ) {
    this.log = resources.log.child({ agentId: options.agentId });
    this.baseEnv = stepBaseEnv(resources.env);
    this.connection = new AgentConnection(
      options,
      {
        registerMessage: () => this.registerMessage(),
        onRegistered: (ack) => this.onRegistered(ack),
        onMessage: (message) => this.onMessage(message),
        onInvalidMessage: (raw, reason, type) => this.onInvalidMessage(raw, reason, type),
        onDisconnected: () => this.onDisconnected(),
        onPermanentFailure: (reason) => this.onPermanentFailure(reason),
      },
      this.log,
      resources.random,
    );
    this.outbox = new Outbox(this.connection, options.bufferCapacity, () => this.finishIfIdle());
  }

  get state(): AgentLifecycle {
    return this.lifecycle;
  }

  /** Connects and runs until drained, stopped or refused; resolves with the process exit code. */
  async run(): Promise<number> {
    await mkdir(this.options.workDir, { recursive: true });
    const exited = new Promise<number>((resolve) => (this.resolveExit = resolve));
    this.connection.start();
    this.metrics = setInterval(() => this.sendMetrics(), this.options.metricsMs);
    this.log.info({ url: this.options.url, labels: this.options.sentLabels }, 'agent started');
    return exited;
  }

  /** SIGUSR1: finish running jobs, refuse new ones with `draining`, exit when idle. */
  drain(): void {
    if (this.lifecycle !== 'running') return;
    this.setLifecycle('draining');
    this.finishIfIdle();
  }

  /** SIGTERM/SIGINT: stop running jobs gracefully (a second call kills them), then exit. */
  shutdown(): void {
    const force = this.lifecycle === 'stopping';
    if (this.lifecycle === 'stopped') return;
    this.setLifecycle('stopping');
    this.stopAll({ kind: 'shutdown', force, message: 'agent shutting down' });
    this.finishIfIdle();
  }

  private setLifecycle(next: AgentLifecycle): void {
    this.log.info({ from: this.lifecycle, to: next }, 'agent lifecycle');
    this.lifecycle = next;
  }

  private registerMessage(): AgentRegister {
    const inFlight = new Map<string, InFlightJob>();
    for (const { dispatch } of this.jobs.values()) inFlight.set(dispatch.jobId, { jobId: dispatch.jobId, runId: dispatch.runId });
    for (const job of this.outbox.pendingTerminalJobs()) inFlight.set(job.jobId, job);
    const user = userInfo();
    return {
      type: 'agent.register',
      messageId: randomUUID(),
      agentId: this.options.agentId,
      labels: this.options.sentLabels,
      maxConcurrency: this.options.maxConcurrency,
      platform: process.platform,
      arch: process.arch,
      version: AGENT_VERSION,
      inFlightJobs: [...inFlight.values()],
      hostname: hostname(),
      osRelease: release(),
      osVersion: osVersion(),
      totalMemoryMb: Math.round(totalmem() / 1024 / 1024),
      cpuCount: cpus().length,
      nodeVersion: process.version,
      runningAsUser: user.username,
      runningAsUid: user.uid,
      properties: { 'switchyard.runSteps': true },
    };
  }

  private onRegistered(ack: RegisterAck): void {
    this.log.info({ labels: ack.labels, scalerManaged: ack.scalerManaged, pendingDispatch: ack.pendingDispatch === true }, 'registered');
    const summary = this.outbox.replay((s) => this.gapMarker(s));
    if (summary.replayed + summary.storedStatuses > 0) this.log.info(summary, 'replayed buffered messages');
    this.disconnectedAt = undefined;
    this.registeredOnce = true;
    this.outbox.direct({ type: 'config.ack', messageId: randomUUID(), agentId: this.options.agentId });
    this.sendAgentStatus();
    this.finishIfIdle();
  }

  private gapMarker(summary: ReplaySummary): AgentMessage | undefined {
    if (this.disconnectedAt === undefined) return undefined;
    const seconds = Math.round((Date.now() - this.disconnectedAt) / 1000);
    const dropped = summary.dropped > 0 ? ` (${summary.dropped} dropped)` : '';
    const line = `Orchestrator offline for ${seconds}s. Replaying ${summary.replayed} messages${dropped} and ${summary.storedStatuses} job statuses`;
    return { type: 'agent.log', agentId: this.options.agentId, lines: [line] };
  }

  private onMessage(message: OrchestratorMessage): void {
    switch (message.type) {
      case 'job.dispatch':
        return this.onDispatch(message);
      case 'job.cancel': {
        const request: StopRequest = { kind: 'cancel', force: message.force === true, message: message.reason || 'cancelled' };
        return this.jobs.get(message.jobId)?.requestStop(request);
      }
      case 'step.approval-resolved':
        this.approvals.get(message.requestId)?.(message.outcome);
        this.approvals.delete(message.requestId);
        return;
      case 'error':
      case 'rate.limit.warning':
      case 'job.concurrency.ack':
        return this.log.warn({ message }, 'orchestrator notice');
      case 'heartbeat':
      case 'auth.success':
      case 'auth.failure':
      case 'register.ack':
      case 'cache.upload.response':
      case 'provenance.upload.response':
      case 'cache.user.restore.response':
      case 'cache.user.save.response':
      case 'event.emit.response':
      case 'agent.api.response':
        return;
      default: {
        const unexpected: never = message;
        this.log.warn({ message: unexpected }, 'unhandled message');
      }
    }
  }

  private onDispatch(dispatch: JobDispatch): void {
    const { jobId, runId } = dispatch;
    if (!this.connection.registered) {
      this.log.warn({ jobId, runId }, 'dispatch before register.ack ignored');
      return;
    }
    if (this.jobs.has(jobId) || this.outbox.hasPendingTerminal(jobId)) {
      this.log.info({ jobId, runId }, 'duplicate dispatch ignored');
      return;
    }
    if (this.lifecycle !== 'running') return this.reject(dispatch, 'draining');
    if (this.jobs.size >= this.options.maxConcurrency) return this.reject(dispatch, 'busy');
    this.startJob(dispatch);
  }

  private startJob(dispatch: JobDispatch): void {
    const runner = new JobRunner(
      dispatch,
      {
        workDir: this.options.workDir,
        jobHeartbeatMs: this.options.jobHeartbeatMs,
        log: { batchLines: this.options.logBatchLines, batchMs: this.options.logBatchMs },
        labels: this.options.sentLabels,
        agentToken: this.options.token,
      },
      { channel: this.channel(), log: this.log, baseEnv: this.baseEnv },
    );
    this.jobs.set(dispatch.jobId, runner);
    this.jobsStarted += 1;
    this.log.info({ runId: dispatch.runId, jobId: dispatch.jobId }, 'job accepted');
    void runner.run().then(
      (status) => this.onJobEnd(dispatch.jobId, status.state),
      (error: unknown) => {
        this.log.error({ err: error, jobId: dispatch.jobId }, 'job runner failed');
        this.onJobEnd(dispatch.jobId, 'failed');
      },
    );
  }

  private onJobEnd(jobId: string, state: string): void {
    this.jobs.delete(jobId);
    this.log.info({ jobId, state }, 'job finished');
    this.sendAgentStatus();
    this.finishIfIdle();
  }

  private reject(dispatch: JobDispatch, reason: 'busy' | 'draining'): void {
    const { runId, jobId } = dispatch;
    this.log.info({ runId, jobId, reason }, 'dispatch rejected');
    this.outbox.direct({ type: 'job.reject', messageId: randomUUID(), runId, jobId, reason, timestamp: Date.now() });
    this.sendAgentStatus();
  }

  /** Our own schema refused a dispatch: fail it visibly instead of leaving the ack deadline to notice. */
  private onInvalidMessage(raw: string, reason: string, type: string | undefined): void {
    this.log.warn({ reason, type }, 'invalid message from orchestrator');
    if (type !== 'job.dispatch' || !this.connection.registered) return;
    const ids = dispatchIds.safeParse(JSON.parse(raw));
    if (!ids.success || this.jobs.has(ids.data.jobId)) return;
    const { runId, jobId } = ids.data;
    this.outbox.direct({ type: 'job.ack', messageId: randomUUID(), runId, jobId, timestamp: Date.now() });
    this.outbox.terminal({
      type: 'job.status',
      messageId: randomUUID(),
      runId,
      jobId,
      state: 'failed',
      timestamp: Date.now(),
      data: { durationMs: 0, error: `invalid dispatch: ${reason}`, stepResults: [] },
    });
  }

  private onDisconnected(): void {
    if (this.registeredOnce) this.disconnectedAt ??= Date.now();
    this.outbox.disconnected();
    // A pending approval does not survive the connection (docs/protocol.md#facts-about-the-stock-agent-that-switchyard-lives-with).
    for (const resolve of this.approvals.values()) resolve('rejected');
    this.approvals.clear();
  }

  private onPermanentFailure(reason: string): void {
    this.log.error({ reason }, 'authentication refused; not reconnecting');
    this.finalExitCode = AGENT_EXIT.AUTH_FAILED;
    this.setLifecycle('stopping');
    this.stopAll({ kind: 'shutdown', force: true, message: `agent authentication refused: ${reason}` });
    this.finishIfIdle();
  }

  private channel(): JobChannel {
    return {
      direct: (message) => this.outbox.direct(message),
      buffered: (message) => this.outbox.buffered(message),
      terminal: (message) => this.outbox.terminal(message),
      requestApproval: (request) => this.requestApproval(request),
    };
  }

  private requestApproval(request: ApprovalRequest): Promise<ApprovalOutcome> {
    if (!this.connection.registered) return Promise.resolve('rejected');
    return new Promise((resolve) => {
      this.approvals.set(request.messageId, resolve);
      this.outbox.direct(request);
    });
  }

  private stopAll(request: StopRequest): void {
    for (const runner of this.jobs.values()) runner.requestStop(request);
  }

  /** Draining or stopping ends once no job runs and no terminal status is owed to a live connection. */
  private finishIfIdle(): void {
    if (this.lifecycle === 'running' || this.lifecycle === 'stopped' || this.jobs.size > 0) return;
    const owed = this.outbox.pendingCount > 0 && this.connection.state !== 'stopped' && this.lifecycle === 'draining';
    if (owed) return;
    this.setLifecycle('stopped');
    clearInterval(this.metrics);
    void this.connection.close().then(() => this.resolveExit(this.finalExitCode));
  }

  private sendAgentStatus(): void {
    const memory = process.memoryUsage();
    this.outbox.direct({
      type: 'agent.status',
      messageId: randomUUID(),
      agentId: this.options.agentId,
      activeJobs: this.jobs.size,
      memoryUsedMb: Math.round(memory.rss / 1024 / 1024),
      uptimeSeconds: Math.round((Date.now() - this.startedAt) / 1000),
    });
  }

  private sendMetrics(): void {
    this.outbox.direct({
      type: 'agent.metrics',
      agentId: this.options.agentId,
      metrics: [
        { name: 'active_jobs', type: 'gauge', value: this.jobs.size },
        { name: 'max_concurrency', type: 'gauge', value: this.options.maxConcurrency },
        { name: 'jobs_started_total', type: 'counter', value: this.jobsStarted },
        { name: 'buffered_messages', type: 'gauge', value: this.outbox.pendingCount },
      ],
    });
  }
}
