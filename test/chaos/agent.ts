import { randomUUID } from 'node:crypto';
import { WebSocket, type RawData } from 'ws';
import { parseOrchestratorMessage, type AgentMessage, type OrchestratorMessage } from '../../src/ws/messages.ts';
import type { AttemptLedger } from './ledger.ts';
import type { Rng } from './rng.ts';

/** How an agent misbehaves, as probabilities per dispatch. */
export interface AgentBehaviour {
  /** The `job.ack` is lost: the agent holds the job and says nothing until it is cancelled. */
  dropAck: number;
  /** Also lose the ack of every agent's n-th dispatch, so even a short run sees some. */
  dropAckOf: number;
  /** The job fails instead of succeeding. */
  fail: number;
  jobMs: readonly [number, number];
}

interface HeldJob {
  runId: string;
  dispatchId: string;
  jobName: string;
  /** The terminal state reached while the socket was down, sent after the next register. */
  unreported: 'success' | 'failed' | null;
  timers: NodeJS.Timeout[];
}

const CONNECT_TIMEOUT_MS = 1500;
const SILENCE_LIMIT_MS = 2000;
/** How long a lost-ack agent waits for the cancel before it gives up on the job by itself. */
const ABANDON_AFTER_MS = 20_000;

/**
 * An agent peer for the chaos suite, in the harness process: protocol v1 over a real WebSocket,
 * jobs simulated with timers. It reconnects (home coordinator first, then the others) with its
 * in-flight jobs, notices a silent coordinator (a SIGSTOPped one) by ping, and records every
 * attempt it holds in the shared ledger.
 */
export class ChaosAgent {
  readonly jobs = new Map<string, HeldJob>();
  socket: WebSocket | null = null;
  connectedTo: string | null = null;
  dead = false;
  private paused = false;
  private reconnecting = false;
  private watchdog: NodeJS.Timeout | undefined;
  private heartbeat: NodeJS.Timeout | undefined;
  private lastPong = 0;
  private dispatches = 0;

  constructor(
    readonly agentId: string,
    private readonly urls: () => string[],
    private readonly ledger: AttemptLedger,
    private readonly rng: Rng,
    private readonly behaviour: AgentBehaviour,
    private readonly log: (line: string) => void = () => undefined,
  ) {}

  get busy(): boolean {
    return this.jobs.size > 0;
  }

  get online(): boolean {
    return this.socket?.readyState === WebSocket.OPEN && this.connectedTo !== null;
  }

  /** Connects, retrying across coordinators until one registers it (or the agent is killed). */
  async start(): Promise<void> {
    if (this.reconnecting || this.dead) return;
    this.reconnecting = true;
    try {
      for (let round = 0; !this.dead && !this.paused; round++) {
        for (const url of this.urls()) {
          if (this.dead || this.paused) return;
          if (await this.tryConnect(url)) return;
        }
        await sleep(Math.min(1000, 100 * 2 ** round));
      }
    } finally {
      this.reconnecting = false;
    }
  }

  /** The network drops: the jobs keep running; the agent comes back after `downMs` with them. */
  disconnect(downMs: number): void {
    this.paused = true;
    this.log(`${this.agentId}: network down for ${downMs} ms, holding ${[...this.jobs.keys()].join(', ') || 'nothing'}`);
    this.socket?.terminate();
    setTimeout(() => {
      this.paused = false;
      void this.start();
    }, downMs).unref();
  }

  /** The agent process dies: every job stops with it and it never comes back. */
  kill(): void {
    this.dead = true;
    this.socket?.terminate();
    for (const job of this.jobs.values()) this.stopJob(job, 'killed');
  }

  /** Closes the socket normally when idle and away from home, so the next connect tries home first. */
  goHome(): void {
    if (!this.dead && !this.busy && this.connectedTo !== null && this.connectedTo !== this.urls()[0]) this.socket?.close(1000, 'going home');
  }

  /** Frames after `register.ack` are handled from the same listener, so none arriving with it is lost. */
  private async tryConnect(url: string): Promise<boolean> {
    const socket = new WebSocket(url, { handshakeTimeout: CONNECT_TIMEOUT_MS });
    socket.on('error', () => undefined);
    let registered = false;
    let gaveUp = false;
    const outcome = new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => {
        gaveUp = true;
        resolve(false);
      }, CONNECT_TIMEOUT_MS * 2);
      socket.once('close', () => resolve(false));
      socket.on('message', (data) => {
        const message = parse(data);
        if (registered) return this.onMessage(message);
        if (gaveUp || message?.type !== 'register.ack') return;
        clearTimeout(timer);
        registered = true;
        this.attach(socket, url);
        resolve(true);
      });
      socket.once('open', () => socket.send(JSON.stringify(this.registerMessage())));
    });
    if (await outcome) return true;
    socket.terminate();
    return false;
  }

  private registerMessage(): AgentMessage {
    this.log(`${this.agentId}: registering, in flight ${[...this.jobs.keys()].join(', ') || 'nothing'}`);
    return {
      type: 'agent.register',
      messageId: randomUUID(),
      agentId: this.agentId,
      labels: ['linux'],
      maxConcurrency: 1,
      properties: { 'switchyard.runSteps': true },
      inFlightJobs: [...this.jobs.values()].map((job) => ({ runId: job.runId, jobId: job.dispatchId })),
    };
  }

  private attach(socket: WebSocket, url: string): void {
    this.socket = socket;
    this.connectedTo = url;
    this.lastPong = performance.now();
    socket.on('pong', () => (this.lastPong = performance.now()));
    this.heartbeat = setInterval(() => this.send({ type: 'heartbeat', timestamp: Date.now() }), 1000);
    this.watchdog = setInterval(() => {
      if (performance.now() - this.lastPong > SILENCE_LIMIT_MS) {
        this.log(`${this.agentId}: ${url} silent for ${SILENCE_LIMIT_MS} ms, reconnecting`);
        socket.terminate();
      } else if (socket.readyState === WebSocket.OPEN) socket.ping();
    }, 400);
    socket.once('close', () => {
      clearInterval(this.heartbeat);
      clearInterval(this.watchdog);
      if (this.socket === socket) {
        this.socket = null;
        this.connectedTo = null;
      }
      if (!this.dead && !this.paused) setTimeout(() => void this.start(), this.rng.int(20, 200)).unref();
    });
    for (const job of this.jobs.values()) {
      if (job.unreported) this.finish(job, job.unreported);
    }
  }

  private onMessage(message: OrchestratorMessage | null): void {
    if (message?.type === 'job.dispatch') this.onDispatch(message.runId, message.jobId, message.jobConfig.name ?? '?');
    else if (message?.type === 'job.cancel') {
      const job = this.jobs.get(message.jobId);
      this.log(`${this.agentId}: job.cancel of attempt ${message.jobId} (${message.reason ?? 'no reason'})${job ? '' : ', not held'}`);
      if (job) {
        this.stopJob(job, 'cancelled');
        this.sendJob(job, { type: 'job.status', state: 'cancelled' });
      }
    }
  }

  private onDispatch(runId: string, dispatchId: string, jobName: string): void {
    if (this.jobs.has(dispatchId)) return;
    const job: HeldJob = { runId, dispatchId, jobName, unreported: null, timers: [] };
    this.jobs.set(dispatchId, job);
    this.ledger.start({ runId, jobName, dispatchId, agentId: this.agentId });
    this.dispatches++;
    if (this.dispatches === this.behaviour.dropAckOf || this.rng.chance(this.behaviour.dropAck)) {
      this.ledger.lostAcks++;
      this.log(`${this.agentId}: dispatch ${runId}/${jobName} attempt ${dispatchId}; its ack is lost`);
      job.timers.push(setTimeout(() => this.stopJob(job, 'abandoned'), ABANDON_AFTER_MS).unref());
      return;
    }
    this.sendJob(job, { type: 'job.ack' });
    this.log(`${this.agentId}: dispatch ${runId}/${jobName} attempt ${dispatchId}; acked`);
    const duration = this.rng.int(...this.behaviour.jobMs);
    const outcome = this.rng.chance(this.behaviour.fail) ? 'failed' : 'success';
    job.timers.push(
      setTimeout(() => {
        this.sendJob(job, { type: 'job.status', state: 'running' });
        this.sendJob(job, { type: 'step.status', stepIndex: 0, stepName: 'step-1', state: 'running' });
      }, this.rng.int(5, 40)),
      setTimeout(() => this.finish(job, outcome), duration),
    );
  }

  /** The job's work is over; its terminal status goes out now, or after the next register. */
  private finish(job: HeldJob, outcome: 'success' | 'failed'): void {
    if (!this.jobs.has(job.dispatchId)) return;
    if (!this.online) {
      if (job.unreported === null) this.ledger.end(this.agentId, job.dispatchId, 'finished');
      job.unreported = outcome;
      return;
    }
    this.sendJob(job, { type: 'step.status', stepIndex: 0, stepName: 'step-1', state: outcome });
    this.sendJob(job, { type: 'job.status', state: outcome, data: { durationMs: 1 } });
    this.stopJob(job, 'finished');
  }

  private stopJob(job: HeldJob, how: 'finished' | 'cancelled' | 'killed' | 'abandoned'): void {
    this.log(`${this.agentId}: attempt ${job.dispatchId} of ${job.runId}/${job.jobName} ${how}`);
    for (const timer of job.timers) clearTimeout(timer);
    this.jobs.delete(job.dispatchId);
    this.ledger.end(this.agentId, job.dispatchId, how);
  }

  private sendJob(job: HeldJob, message: Record<string, unknown>): void {
    this.send({ messageId: randomUUID(), runId: job.runId, jobId: job.dispatchId, timestamp: Date.now(), ...message });
  }

  private send(message: Record<string, unknown>): void {
    if (this.socket?.readyState === WebSocket.OPEN) this.socket.send(JSON.stringify(message));
  }
}

function parse(data: RawData): OrchestratorMessage | null {
  const text = Buffer.isBuffer(data) ? data.toString('utf8') : Buffer.concat(Array.isArray(data) ? data : [Buffer.from(data)]).toString('utf8');
  const parsed = parseOrchestratorMessage(text);
  return parsed.ok ? parsed.message : null;
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
