import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { WebSocket, type RawData } from 'ws';
import {
  PROTOCOL_VERSION,
  parseOrchestratorMessage,
  type AgentMessage,
  type AgentRegister,
  type InFlightJob,
  type OrchestratorMessage,
  type OrchestratorMessageOf,
  type OrchestratorMessageType,
  type RegisterAck,
  type WireJobState,
  type WireStepState,
} from '../../src/ws/messages.ts';
import { ZLIB_CONCURRENCY } from '../../src/ws/server.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

/** The attempt a message is about: a `job.dispatch` (its `jobId` is the dispatch id) or its ids. */
export interface Attempt {
  runId: string;
  jobId: string;
}

export type JobDispatchFrame = OrchestratorMessageOf<'job.dispatch'>;

export interface FakeAgentOptions {
  agentId?: string;
  labels?: string[];
  maxConcurrency?: number;
  /** @default { 'switchyard.runSteps': true } so jobs with `run` steps match. */
  properties?: AgentRegister['properties'];
  inFlightJobs?: InFlightJob[];
  /** Called for every `job.dispatch`, in the tick the frame arrives. */
  onDispatch?: (dispatch: JobDispatchFrame, agent: FakeAgent) => void;
  /** `permessage-deflate` as the stock agent offers it. @default true */
  compress?: boolean;
  /** `heartbeat` period once registered, as the stock agent's; 0 sends none. @default 30000 */
  heartbeatMs?: number;
}

/**
 * A scripted agent peer of protocol v1 against a real coordinator: every frame the coordinator
 * sends is parsed with the shared schemas (a schema failure fails the next wait) and kept in order.
 */
export class FakeAgent {
  readonly received: OrchestratorMessage[] = [];
  readonly invalid: string[] = [];
  readonly closed: Promise<{ code: number; reason: string }>;
  readonly agentId: string;
  private listeners: (() => void)[] = [];
  private heartbeat: NodeJS.Timeout | undefined;

  private constructor(
    readonly socket: WebSocket,
    private readonly options: FakeAgentOptions,
  ) {
    this.agentId = options.agentId ?? `fake-${randomUUID().slice(0, 8)}`;
    socket.on('message', (data, isBinary) => this.onFrame(data, isBinary));
    socket.on('error', () => undefined);
    this.closed = new Promise((resolve) =>
      socket.once('close', (code, reason) => {
        clearInterval(this.heartbeat);
        resolve({ code, reason: reason.toString('utf8') });
      }),
    );
  }

  /** Opens the socket and stops there: the handshake is up to the test. */
  static async open(url: string, options: FakeAgentOptions = {}): Promise<FakeAgent> {
    // In-process agents share ws's one zlib queue with the coordinator; the first socket sets its limit.
    const socket = new WebSocket(url, { perMessageDeflate: options.compress === false ? false : { threshold: 128, concurrencyLimit: ZLIB_CONCURRENCY }, maxPayload: 64 * 1024 * 1024 });
    await new Promise<void>((resolve, reject) => {
      socket.once('open', () => resolve());
      socket.once('error', reject);
    });
    return new FakeAgent(socket, options);
  }

  /** Opens, authenticates (unless `token` is null: auth mode none) and registers. */
  static async connect(url: string, token: string | null, options: FakeAgentOptions = {}): Promise<FakeAgent> {
    const agent = await FakeAgent.open(url, options);
    if (token !== null) await agent.authenticate(token);
    await agent.register();
    return agent;
  }

  get isOpen(): boolean {
    return this.socket.readyState === WebSocket.OPEN;
  }

  async authenticate(token: string): Promise<void> {
    this.send({ type: 'auth.request', token, protocolVersion: PROTOCOL_VERSION });
    await this.next('auth.success');
  }

  registerMessage(extra: Partial<AgentRegister> = {}): AgentRegister {
    return {
      type: 'agent.register',
      messageId: randomUUID(),
      agentId: this.agentId,
      labels: this.options.labels ?? [],
      maxConcurrency: this.options.maxConcurrency ?? 1,
      properties: this.options.properties ?? { 'switchyard.runSteps': true },
      inFlightJobs: this.options.inFlightJobs ?? [],
      ...extra,
    };
  }

  async register(extra: Partial<AgentRegister> = {}): Promise<RegisterAck> {
    const before = this.received.length;
    this.send(this.registerMessage(extra));
    const ack = await this.next('register.ack', undefined, 10_000, before);
    const every = this.options.heartbeatMs ?? 30_000;
    if (every > 0 && this.heartbeat === undefined) {
      this.heartbeat = setInterval(() => this.isOpen && this.send({ type: 'heartbeat', timestamp: Date.now() }), every).unref();
    }
    return ack;
  }

  send(message: AgentMessage | { type: string; [key: string]: unknown }): void {
    this.socket.send(JSON.stringify(message));
  }

  sendRaw(data: string | Buffer, binary = false): void {
    this.socket.send(data, { binary });
  }

  ack(attempt: Attempt): void {
    this.send({ type: 'job.ack', messageId: randomUUID(), runId: attempt.runId, jobId: attempt.jobId, timestamp: Date.now() });
  }

  reject(attempt: Attempt, reason: 'busy' | 'draining' = 'busy'): void {
    this.send({ type: 'job.reject', messageId: randomUUID(), runId: attempt.runId, jobId: attempt.jobId, reason, timestamp: Date.now() });
  }

  status(attempt: Attempt, state: WireJobState, data?: { error?: string; durationMs?: number }): void {
    const { runId, jobId } = attempt;
    this.send({ type: 'job.status', messageId: randomUUID(), runId, jobId, state, timestamp: Date.now(), ...(data && { data }) });
  }

  step(attempt: Attempt, stepIndex: number, stepName: string, state: WireStepState): void {
    const { runId, jobId } = attempt;
    this.send({ type: 'step.status', messageId: randomUUID(), runId, jobId, stepIndex, stepName, state, timestamp: Date.now() });
  }

  log(attempt: Attempt, stepIndex: number, lines: string[]): void {
    const { runId, jobId } = attempt;
    this.send({ type: 'log.chunk', messageId: randomUUID(), runId, jobId, stepIndex, lines, timestamp: Date.now() });
  }

  /** ack → running → success in one tick (B1: a terminal status within 1 ms of the dispatch). */
  runAtOnce(attempt: Attempt): void {
    this.ack(attempt);
    this.status(attempt, 'running');
    this.status(attempt, 'success', { durationMs: 0 });
  }

  /** The first frame of `type` matching `where` at index `from` or later, waiting for it. */
  next<T extends OrchestratorMessageType>(
    type: T,
    where: (message: OrchestratorMessageOf<T>) => boolean = () => true,
    timeoutMs = 15_000,
    from = 0,
  ): Promise<OrchestratorMessageOf<T>> {
    const find = () =>
      this.received.slice(from).find((m): m is OrchestratorMessageOf<T> => m.type === type && where(m as OrchestratorMessageOf<T>));
    return this.waitFor(find, timeoutMs, type);
  }

  /** The `index`-th `job.dispatch` (0-based) this socket received. */
  dispatch(index = 0, timeoutMs = 15_000): Promise<JobDispatchFrame> {
    const find = () => this.received.filter((m): m is JobDispatchFrame => m.type === 'job.dispatch')[index];
    return this.waitFor(find, timeoutMs, `job.dispatch #${index}`);
  }

  private async waitFor<T>(find: () => T | undefined, timeoutMs: number, what: string): Promise<T> {
    const deadline = Date.now() + timeoutMs;
    for (let found = find(); ; found = find()) {
      if (this.invalid.length > 0) throw new Error(`the coordinator sent an invalid frame: ${this.invalid.join('; ')}`);
      if (found !== undefined) return found;
      const remaining = deadline - Date.now();
      if (remaining <= 0) throw new Error(`${this.agentId}: no ${what} within ${timeoutMs} ms; got ${this.types().join(', ') || 'nothing'}`);
      await this.changed(remaining);
    }
  }

  types(): string[] {
    return this.received.map((m) => m.type);
  }

  /** Drops the TCP connection without a close frame (the coordinator sees 1006). */
  drop(): void {
    this.socket.terminate();
  }

  async close(code = 1000, reason = 'fake agent done'): Promise<void> {
    if (this.socket.readyState === WebSocket.CLOSED) return;
    this.socket.close(code, reason);
    const timer = setTimeout(() => this.socket.terminate(), 2000);
    await this.closed;
    clearTimeout(timer);
  }

  private onFrame(data: RawData, isBinary: boolean): void {
    if (isBinary) {
      this.invalid.push('binary frame');
      return this.notify();
    }
    const parsed = parseOrchestratorMessage(frameText(data));
    if (!parsed.ok) this.invalid.push(parsed.reason);
    else {
      this.received.push(parsed.message);
      if (parsed.message.type === 'job.dispatch') this.options.onDispatch?.(parsed.message, this);
    }
    this.notify();
  }

  private notify(): void {
    for (const listener of this.listeners.splice(0)) listener();
  }

  private changed(timeoutMs: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(done, timeoutMs);
      const listeners = this.listeners;
      function done() {
        clearTimeout(timer);
        const index = listeners.indexOf(done);
        if (index >= 0) listeners.splice(index, 1);
        resolve();
      }
      listeners.push(done);
    });
  }
}

function frameText(data: RawData): string {
  if (Buffer.isBuffer(data)) return data.toString('utf8');
  if (Array.isArray(data)) return Buffer.concat(data).toString('utf8');
  return Buffer.from(data).toString('utf8');
}

export interface RealAgentProcess {
  child: ChildProcess;
  exited: Promise<number | null>;
  output: () => string;
  kill(signal?: NodeJS.Signals): Promise<void>;
}

/** `switchyard agent` as its own process, exactly as an operator starts it. */
export function spawnRealAgent(args: { wsUrl: string; token: string; labels: string[]; agentId: string; workDir: string; extra?: string[] }): RealAgentProcess {
  const argv = ['--url', args.wsUrl, '--token', args.token, '--labels', args.labels.join(','), '--agent-id', args.agentId, '--work-dir', args.workDir];
  const child = spawn(process.execPath, ['--no-node-snapshot', '--import', 'tsx', 'src/cli/main.ts', 'agent', ...argv, ...(args.extra ?? [])], {
    cwd: ROOT,
    env: { ...process.env, LOG_LEVEL: 'info' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  // 'close', not 'exit': by then every line it wrote has been read, so `output()` is complete.
  const exited = new Promise<number | null>((resolve) => child.once('close', (code) => resolve(code)));
  return {
    child,
    exited,
    output: () => output,
    async kill(signal = 'SIGKILL') {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      await exited;
    },
  };
}

export interface StepView {
  index: number;
  name: string;
  status: string;
  hook: string | null;
  durationMs: number | null;
  exitCode: number | null;
  error: string | null;
}

export interface JobView {
  job_key: string;
  status: string;
  attempt: number;
  agent_id: string | null;
  dispatch_id: string | null;
  outcome: string | null;
  steps: StepView[];
  duration_ms: number | null;
  outputs: Record<string, unknown> | null;
  init_failure: { scope: string; category: string; message: string } | null;
  waiting_reason: { kind: string; message: string } | null;
}

export interface RunView {
  run: { run_id: string; status: string; failure_reason: string | null; number?: number | null };
  jobs: JobView[];
}

export interface JournalEvent {
  type: string;
  jobKey?: string;
  agentId?: string;
  dispatchId?: string;
  state?: string;
  /** When the coordinator received the event (every journaled event has it). */
  at: number;
  /** Timer events: when the deadline was due. */
  dueAt?: number;
}

export interface LogChunkView {
  jobKey: string;
  dispatchId: string;
  stepIndex: number;
  lines: string[];
}

/** The coordinator's HTTP API as agent tests drive it (admin bearer token on every call). */
export class CoordinatorClient {
  constructor(
    readonly url: string,
    private readonly adminToken: string,
  ) {}

  get wsUrl(): string {
    return `${this.url.replace(/^http/, 'ws')}/ws/agent`;
  }

  async json<T>(path: string, init: RequestInit = {}, expected = 200): Promise<T> {
    const headers = { authorization: `Bearer ${this.adminToken}`, 'content-type': 'application/json' };
    const res = await fetch(`${this.url}${path}`, { ...init, headers: { ...headers, ...init.headers } });
    const text = await res.text();
    if (res.status !== expected) throw new Error(`${init.method ?? 'GET'} ${path}: ${res.status} (expected ${expected}): ${text}`);
    return JSON.parse(text) as T;
  }

  createToken(body: { labels?: string[]; mandatoryLabels?: string[] } = {}): Promise<{ id: string; token: string }> {
    return this.json('/api/v1/agent-tokens', { method: 'POST', body: JSON.stringify(body) }, 201);
  }

  async revokeToken(id: string): Promise<void> {
    await this.json(`/api/v1/agent-tokens/${id}`, { method: 'DELETE' });
  }

  async createRun(workflow: object, source: { repoUrl?: string; ref?: string; sha?: string } = {}): Promise<string> {
    const body = JSON.stringify({ repository: 'acme/app', workflow, ...source });
    return (await this.json<{ runId: string }>('/api/v1/runs', { method: 'POST', body }, 201)).runId;
  }

  run(runId: string): Promise<RunView> {
    return this.json(`/api/v1/runs/${runId}`);
  }

  async job(runId: string, jobKey: string): Promise<JobView> {
    const job = (await this.run(runId)).jobs.find((j) => j.job_key === jobKey);
    if (!job) throw new Error(`run ${runId} has no job ${jobKey}`);
    return job;
  }

  /** Polls the run projection until `until` holds; the error names the last state seen. */
  async waitForRun(runId: string, until: (view: RunView) => boolean, timeoutMs = 20_000, what = 'the run'): Promise<RunView> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const view = await this.run(runId);
      if (until(view)) return view;
      if (Date.now() > deadline) {
        const jobs = view.jobs.map((j) => `${j.job_key}=${j.status}#${j.attempt} (${j.outcome ?? ''})`).join(', ');
        throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}; run ${view.run.status}, jobs ${jobs}`);
      }
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
  }

  waitForRunStatus(runId: string, status: string, timeoutMs = 20_000): Promise<RunView> {
    return this.waitForRun(runId, (view) => view.run.status === status, timeoutMs, `run status ${status}`);
  }

  async waitForJob(runId: string, jobKey: string, until: (job: JobView) => boolean, timeoutMs = 20_000, what = 'the job'): Promise<JobView> {
    const view = await this.waitForRun(runId, (v) => v.jobs.some((j) => j.job_key === jobKey && until(j)), timeoutMs, `${jobKey}: ${what}`);
    return view.jobs.find((j) => j.job_key === jobKey) as JobView;
  }

  async journal(runId: string): Promise<JournalEvent[]> {
    const { events } = await this.json<{ events: { event: JournalEvent }[] }>(`/api/v1/runs/${runId}/events`);
    return events.map((e) => e.event);
  }

  async logs(runId: string, query = ''): Promise<LogChunkView[]> {
    return (await this.json<{ chunks: LogChunkView[] }>(`/api/v1/runs/${runId}/logs${query}`)).chunks;
  }

  async cancel(runId: string, body: { force?: boolean; reason?: string } = {}): Promise<void> {
    await this.json(`/api/v1/runs/${runId}/cancel`, { method: 'POST', body: JSON.stringify(body) }, 202);
  }

  async metrics(): Promise<string> {
    return (await fetch(`${this.url}/metrics`)).text();
  }

  /** The value of one sample in /metrics, 0 when absent. */
  async metric(name: string, labels = ''): Promise<number> {
    const line = (await this.metrics()).split('\n').find((l) => l.startsWith(`${name}${labels} `));
    return line === undefined ? 0 : Number(line.slice(line.lastIndexOf(' ') + 1));
  }

  async healthy(): Promise<boolean> {
    const res = await fetch(`${this.url}/healthz`).catch(() => null);
    return res?.status === 200;
  }
}

/** A workflow of jobs with `run` steps, each job requiring `label` (so only this test's agents match). */
export function runStepsWorkflow(
  name: string,
  label: string,
  jobs: { name: string; steps: [string, string][]; needs?: string[]; gracePeriod?: number }[],
): object {
  return {
    name,
    jobs: jobs.map((job) => ({
      _type: 'static',
      name: job.name,
      runsOn: [{ kind: 'exact', value: label }],
      needs: job.needs ?? [],
      steps: job.steps.map(([stepName, run]) => ({ name: stepName, hasOutputs: false, run })),
      ...(job.gracePeriod !== undefined && { gracePeriod: job.gracePeriod }),
    })),
  };
}

/** Drops the database a coordinator process used, through the same server's `postgres` database. */
export async function dropDatabase(databaseUrl: string): Promise<void> {
  const url = new URL(databaseUrl);
  const name = url.pathname.slice(1);
  url.pathname = '/postgres';
  const admin = new pg.Client({ connectionString: url.toString() });
  await admin.connect();
  try {
    await admin.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
  } finally {
    await admin.end();
  }
}
