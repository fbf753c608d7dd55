import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { WebSocket, type RawData } from 'ws';
import { parseOrchestratorMessage, PROTOCOL_VERSION } from '../../src/ws/messages.ts';
import type { JobDispatch, OrchestratorMessage, OrchestratorMessageOf, OrchestratorMessageType, RegisterAck } from '../../src/ws/messages.ts';
import { KiciFrames, type AgentIdentity } from './kici-agent-frames.ts';
import { JobRun, type JobChannel, type JobEnd } from './kici-agent-job.ts';
import { succeedAll, type JobScript, type ScriptFor } from './kici-agent-scripts.ts';
import { agentTemplate, type WireFrame } from './kici-wire-fixture.ts';

export interface KiciTestAgentOptions {
  /** `KICI_ORCHESTRATOR_URL`: the socket URL, used verbatim (no path is appended). */
  url: string;
  /** `KICI_AGENT_TOKEN`. Without one the first frame is `agent.register` (auth mode `none`). */
  token?: string;
  /** `KICI_AGENT_ID`. @default `kici-test-<8 hex>` */
  agentId?: string;
  /** `KICI_LABELS`: configured labels; the `kici:` prefix is reserved. @default [] */
  labels?: string[];
  /** `KICI_ROLES` roles. @default ['builder', 'init-runner'] */
  roles?: string[];
  /** @default os.hostname() */
  hostname?: string;
  /** @default process.platform */
  platform?: NodeJS.Platform;
  /** @default process.arch */
  arch?: string;
  /** Decides the answer to each dispatch. @default succeedAll() */
  script?: ScriptFor;
  /** Gap before each job frame, so the order is the recorded one. @default 3 */
  paceMs?: number;
  /** `heartbeat` period while registered; 0 sends none. @default 30000 */
  heartbeatMs?: number;
  /** `job.heartbeat` period per running job; 0 sends none. @default 60000 */
  jobHeartbeatMs?: number;
  /** `agent.metrics` period while registered (it is also sent after each job); 0 sends none. @default 30000 */
  metricsMs?: number;
  /** Reconnect after a close that is not 4010, `auth.failure` or `close()`. @default true */
  reconnect?: boolean;
  /** Backoff: base × 1.5^attempt × (1 + random·0.5), capped at 60 s, reset on `register.ack`. @default 1000 */
  reconnectBaseMs?: number;
  /** permessage-deflate with threshold 128, as the stock agent offers. @default true */
  compress?: boolean;
}

export type KiciAgentState = 'idle' | 'connecting' | 'authenticating' | 'registering' | 'registered' | 'disconnected' | 'stopped';

const RING_SIZE = 5000;
const LOG_BUFFER_LINES = 10_000;
const BACKOFF_CAP_MS = 60_000;

/**
 * A KiCI agent double that speaks protocol v1 as the stock agent 0.1.24 does (protocol.md §4, §8,
 * §10.1, §15) and answers each dispatch with frames shaped like the recorded session's. Every frame
 * it receives is parsed with our schemas; one that fails is kept in `invalid` and fails every wait.
 */
export class KiciTestAgent {
  readonly agentId: string;
  /** Orchestrator frames that parsed, in arrival order. */
  readonly received: OrchestratorMessage[] = [];
  /** Orchestrator frames our own schema refuses (an unknown type included). */
  readonly invalid: { raw: string; reason: string }[] = [];
  /** Frames written to a socket, in order. */
  readonly sent: WireFrame[] = [];
  /** Direct-path frames dropped because the socket was not open (protocol.md §10.1). */
  readonly dropped: WireFrame[] = [];
  readonly dispatches: JobDispatch[] = [];
  readonly closes: { code: number; reason: string }[] = [];
  /** Failures inside the agent itself (a throwing script, a broken job run); they fail every wait. */
  readonly failures: string[] = [];
  /** How each finished job ended, by jobId. */
  readonly ended = new Map<string, JobEnd>();
  private readonly frames: KiciFrames;
  private readonly jobs = new Map<string, JobRun>();
  private readonly jobCounts: Record<string, number> = {};
  private currentState: KiciAgentState = 'idle';
  private socket: WebSocket | null = null;
  private stopReason: string | null = null;
  private attempt = 0;
  private offlineSince = Date.now();
  private ring: WireFrame[] = [];
  private logBuffer: string[] = [];
  private timers: NodeJS.Timeout[] = [];
  private reconnectTimer: NodeJS.Timeout | undefined;
  private draining = false;
  private dispatchCursor = 0;
  private listeners = new Set<() => void>();

  constructor(private readonly options: KiciTestAgentOptions) {
    const labels = options.labels ?? [];
    const reserved = labels.filter((label) => label.startsWith('kici:'));
    if (reserved.length > 0) throw new Error(`KICI_LABELS: the kici: prefix is reserved (${reserved.join(', ')})`);
    this.agentId = options.agentId ?? `kici-test-${randomBytes(4).toString('hex')}`;
    const identity: AgentIdentity = {
      ...{ agentId: this.agentId, url: options.url, token: options.token, labels, roles: options.roles ?? ['builder', 'init-runner'] },
      ...{ hostname: options.hostname ?? hostname(), platform: options.platform ?? process.platform, arch: options.arch ?? process.arch },
    };
    this.frames = new KiciFrames(identity);
  }

  get state(): KiciAgentState {
    return this.currentState;
  }

  /** Jobs still running (or held), by jobId. */
  get activeJobs(): string[] {
    return [...this.jobs.keys()];
  }

  /** Connects and resolves at the first `register.ack`; rejects if the agent stops first (4010, auth.failure). */
  async start(timeoutMs = 15_000): Promise<RegisterAck> {
    if (this.currentState !== 'idle') throw new Error(`start: the agent is already ${this.currentState}`);
    this.logBuffer.push(this.frames.logLine('Agent started', { agentId: this.agentId }));
    this.connect();
    return this.waitFor('register.ack', { timeoutMs });
  }

  /** Stops for good, as an operator would: no reconnect, jobs abandoned. `abrupt` drops TCP (1006) like the stock SIGTERM drain. */
  async close(options: { abrupt?: boolean } = {}): Promise<void> {
    this.stopReason ??= 'closed by the test';
    clearTimeout(this.reconnectTimer);
    for (const job of this.jobs.values()) job.stop();
    const socket = this.socket;
    if (socket && socket.readyState !== WebSocket.CLOSED) {
      const closed = new Promise((resolve) => socket.once('close', resolve));
      if (options.abrupt) socket.terminate();
      else socket.close(1000, 'agent shutting down');
      const timer = setTimeout(() => socket.terminate(), 2000);
      await closed;
      clearTimeout(timer);
    }
    this.setState('stopped');
  }

  /** Drops the TCP connection without a close frame (the coordinator sees 1006); reconnect rules apply. */
  dropConnection(): void {
    this.socket?.terminate();
  }

  /** Skips the rest of the backoff wait: a test can act while the agent is offline, then let it back. */
  reconnectNow(): void {
    if (this.currentState !== 'disconnected') throw new Error(`reconnectNow: the agent is ${this.currentState}, not disconnected`);
    clearTimeout(this.reconnectTimer);
    this.connect();
  }

  /** Every later dispatch is answered `job.reject {draining}` (the stock agent on SIGUSR1). */
  drain(): void {
    this.draining = true;
  }

  /** Ends a job held by a `hold()` script with `script` (default: success). */
  finish(jobId: string, script?: JobScript): void {
    const job = this.jobs.get(jobId);
    if (!job?.finish(script)) throw new Error(`finish: ${jobId} is not a held job of ${this.agentId}`);
  }

  /** The next `job.dispatch` not yet returned by this method. */
  async nextDispatch(timeoutMs = 15_000): Promise<JobDispatch> {
    const dispatch = await this.until(() => this.dispatches[this.dispatchCursor], timeoutMs, 'job.dispatch');
    this.dispatchCursor += 1;
    return dispatch;
  }

  /** The first received frame of `type` at index `from` or later that `where` accepts. */
  waitFor<T extends OrchestratorMessageType>(
    type: T,
    options: { where?: (message: OrchestratorMessageOf<T>) => boolean; timeoutMs?: number; from?: number } = {},
  ): Promise<OrchestratorMessageOf<T>> {
    const where = options.where ?? (() => true);
    const find = () =>
      this.received.slice(options.from ?? 0).find((m): m is OrchestratorMessageOf<T> => m.type === type && where(m as OrchestratorMessageOf<T>));
    return this.until(find, options.timeoutMs ?? 15_000, type);
  }

  /** The first frame this agent wrote of `type` that `where` accepts. */
  waitForSent(type: string, where: (frame: WireFrame) => boolean = () => true, timeoutMs = 15_000): Promise<WireFrame> {
    return this.until(() => this.sent.find((frame) => frame.type === type && where(frame)), timeoutMs, `sent ${type}`);
  }

  /** How job `jobId` ended, once it has. */
  jobEnd(jobId: string, timeoutMs = 15_000): Promise<JobEnd> {
    return this.until(() => this.ended.get(jobId), timeoutMs, `the end of job ${jobId}`);
  }

  /**
   * Runs `act` synchronously the next time the agent enters `state`, before it reads another frame:
   * a test can place an action exactly in a window of the handshake (between auth.request and register).
   */
  whenState(state: KiciAgentState, act: () => void): void {
    const check = () => {
      if (this.currentState !== state) return;
      this.listeners.delete(check);
      act();
    };
    this.listeners.add(check);
  }

  /** Waits for the agent's own state, e.g. `registered` again after a reconnect. */
  waitForState(state: KiciAgentState, timeoutMs = 15_000): Promise<KiciAgentState> {
    return this.until(() => (this.currentState === state ? state : undefined), timeoutMs, `state ${state}`, state === 'stopped');
  }

  private connect(): void {
    this.setState('connecting');
    const socket = new WebSocket(this.options.url, { perMessageDeflate: this.options.compress === false ? false : { threshold: 128 } });
    this.socket = socket;
    socket.on('open', () => this.opened());
    socket.on('message', (data, isBinary) => this.onFrame(data, isBinary));
    socket.on('error', (error) => this.logBuffer.push(this.frames.logLine('WebSocket error', { error: error.message })));
    socket.on('close', (code, reason) => this.onClose(code, reason.toString('utf8')));
  }

  private opened(): void {
    if (this.options.token === undefined) return this.register();
    this.setState('authenticating');
    this.write({ ...agentTemplate('auth.request'), token: this.options.token, protocolVersion: PROTOCOL_VERSION });
  }

  private register(): void {
    this.setState('registering');
    const inFlight = [...this.jobs.values()].map((job) => ({ jobId: job.jobId, runId: job.runId }));
    this.write(this.frames.register(inFlight));
  }

  private onFrame(data: RawData, isBinary: boolean): void {
    const raw = frameText(data);
    const parsed = isBinary ? { ok: false as const, reason: 'binary frame' } : parseOrchestratorMessage(raw);
    if (!parsed.ok) {
      this.invalid.push({ raw: raw.slice(0, 2000), reason: parsed.reason });
      return this.notify();
    }
    const message = parsed.message;
    this.received.push(message);
    if (message.type === 'auth.success') this.register();
    else if (message.type === 'auth.failure') this.stopReason ??= `auth.failure: ${message.reason}`;
    else if (message.type === 'register.ack') this.registered();
    else if (message.type === 'job.dispatch') this.onDispatch(message);
    else if (message.type === 'job.cancel') this.jobs.get(message.jobId)?.cancel(message.reason, message.force ?? false);
    this.notify();
  }

  /** Resets the backoff, starts heartbeats, replays the buffers after one gap marker, then `config.ack` (§4, §10.1). */
  private registered(): void {
    this.attempt = 0;
    this.setState('registered');
    this.startTimers();
    const events = this.ring.splice(0);
    const lines = this.logBuffer.splice(0);
    this.write(this.frames.gapMarker(Date.now() - this.offlineSince, events.length, lines.length));
    for (const frame of events) this.write(frame);
    if (lines.length > 0) this.write(this.frames.agentLog(lines));
    this.write(this.frames.configAck());
  }

  private startTimers(): void {
    this.stopTimers();
    const every = (ms: number | undefined, fallback: number, frame: () => WireFrame) => {
      const period = ms ?? fallback;
      if (period > 0) this.timers.push(setInterval(() => this.currentState === 'registered' && this.write(frame()), period).unref());
    };
    every(this.options.heartbeatMs, 30_000, () => this.frames.heartbeat());
    every(this.options.metricsMs, 30_000, () => this.frames.agentMetrics(this.jobCounts, this.jobs.size));
  }

  private stopTimers(): void {
    for (const timer of this.timers.splice(0)) clearInterval(timer);
  }

  /** One job at a time, as the stock agent: a second dispatch is refused `busy`, then `agent.status` (§6, §10.4). */
  private onDispatch(dispatch: JobDispatch): void {
    this.dispatches.push(dispatch);
    const script = this.scriptFor(dispatch);
    if (script === null || script.kind === 'silent') return;
    const refusal = this.jobs.size > 0 ? 'busy' : this.draining ? 'draining' : null;
    if (refusal !== null) return this.refuse(dispatch, refusal);
    if (script.kind === 'reject') return this.refuse(dispatch, script.reason);
    const job = new JobRun(dispatch, script, this.frames, this.channel, {
      paceMs: this.options.paceMs ?? 3,
      jobHeartbeatMs: this.options.jobHeartbeatMs ?? 60_000,
    });
    this.jobs.set(dispatch.jobId, job);
    job.run().catch((thrown: unknown) => this.fail(`job ${dispatch.jobId}: ${String(thrown)}`));
  }

  private scriptFor(dispatch: JobDispatch): JobScript | null {
    try {
      return (this.options.script ?? succeedAll())(dispatch);
    } catch (thrown: unknown) {
      this.fail(`the script for ${dispatch.jobId} threw: ${String(thrown)}`);
      return null;
    }
  }

  private fail(failure: string): void {
    this.failures.push(failure);
    this.notify();
  }

  private refuse(dispatch: JobDispatch, reason: 'busy' | 'draining'): void {
    this.channel.direct(this.frames.jobReject(dispatch, reason));
    this.channel.direct(this.frames.agentStatus(this.jobs.size));
  }

  private readonly channel: JobChannel = {
    direct: (frame) => {
      if (this.socket?.readyState === WebSocket.OPEN) this.write(frame);
      else this.dropped.push(frame);
    },
    buffered: (frame) => {
      if (this.currentState === 'registered' && this.socket?.readyState === WebSocket.OPEN) return this.write(frame);
      this.ring.push(frame);
      if (this.ring.length > RING_SIZE) this.ring.shift();
    },
    agentLog: (line) => {
      if (this.currentState === 'registered' && this.socket?.readyState === WebSocket.OPEN) return this.write(this.frames.agentLog([line]));
      this.logBuffer.push(line);
      if (this.logBuffer.length > LOG_BUFFER_LINES) this.logBuffer.shift();
    },
    ended: (job, end) => {
      this.jobs.delete(job.jobId);
      this.ended.set(job.jobId, end);
      this.jobCounts[end] = (this.jobCounts[end] ?? 0) + 1;
      this.notify();
      void sleep(this.options.paceMs ?? 3).then(() => {
        this.channel.direct(this.frames.agentStatus(this.jobs.size));
        this.channel.direct(this.frames.agentMetrics(this.jobCounts, this.jobs.size));
      });
    },
  };

  private onClose(code: number, reason: string): void {
    this.closes.push({ code, reason });
    this.socket = null;
    this.stopTimers();
    if (this.currentState === 'registered') this.offlineSince = Date.now();
    if (code === 4010) this.stopReason ??= `closed 4010: ${reason}`;
    if (this.stopReason !== null || this.options.reconnect === false) {
      this.stopReason ??= `closed ${code} and reconnect is off`;
      return this.setState('stopped');
    }
    this.setState('disconnected');
    const delay = Math.min(BACKOFF_CAP_MS, Math.round((this.options.reconnectBaseMs ?? 1000) * 1.5 ** this.attempt * (1 + Math.random() * 0.5)));
    this.attempt += 1;
    this.reconnectTimer = setTimeout(() => this.stopReason === null && this.connect(), delay);
  }

  private write(frame: WireFrame): void {
    if (this.socket?.readyState !== WebSocket.OPEN) {
      this.dropped.push(frame);
      return;
    }
    this.socket.send(JSON.stringify(frame));
    this.sent.push(frame);
    this.notify();
  }

  private setState(state: KiciAgentState): void {
    this.currentState = state;
    this.notify();
  }

  private notify(): void {
    for (const listener of [...this.listeners]) listener();
  }

  /** Resolves with `find()` once it is defined; fails on an invalid orchestrator frame or when the agent stopped. */
  private until<T>(find: () => T | undefined, timeoutMs: number, what: string, stopOk = false): Promise<T> {
    return new Promise((resolve, reject) => {
      const settle = (done: () => void) => {
        this.listeners.delete(check);
        clearTimeout(timer);
        done();
      };
      const check = () => {
        const found = find();
        const failure = this.invalid.length > 0
          ? `the coordinator sent a frame our schema refuses: ${this.invalid.map((f) => f.reason).join('; ')}`
          : this.failures.length > 0 ? this.failures.join('; ')
          : found === undefined && this.currentState === 'stopped' && !stopOk ? `the agent stopped (${this.stopReason ?? 'unknown'})` : null;
        if (failure !== null) settle(() => reject(new Error(`${this.agentId}: waiting for ${what}: ${failure}`)));
        else if (found !== undefined) settle(() => resolve(found));
      };
      const timer = setTimeout(() => {
        this.listeners.delete(check);
        reject(new Error(`${this.agentId}: no ${what} within ${timeoutMs} ms; received ${this.received.map((m) => m.type).join(', ') || 'nothing'}`));
      }, timeoutMs);
      this.listeners.add(check);
      check();
    });
  }
}

function frameText(data: RawData): string {
  if (Buffer.isBuffer(data)) return data.toString('utf8');
  if (Array.isArray(data)) return Buffer.concat(data).toString('utf8');
  return Buffer.from(data).toString('utf8');
}
