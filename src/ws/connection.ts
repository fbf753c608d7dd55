import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import type { WebSocket } from 'ws';
import type { AgentSession, SlotHolder } from '../../actors/agents/registry.ts';
import { coerceError } from '../../lib/errors.ts';
import { checkRegisterGates } from './gates.ts';
import type { TokenInfo } from './gates.ts';
import { JOB_SCOPED_TYPES, JobFrames } from './job-messages.ts';
import type { JobMessageDeps, JobScopedMessage, OwnershipCause } from './job-messages.ts';
import { CLOSE_CODES, INFORMATIONAL_AGENT_TYPES, MIN_PROTOCOL_VERSION, isStorageRequest, parseAgentMessage, refusalFor, truncateCloseReason } from './messages.ts';
import type { StorageRequest } from './messages.ts';
import type { AgentRequests } from './agent-requests.ts';
import type { AgentMessage, AgentMessageOf, ParseResult } from './messages.ts';
import { ConnectionLimits, ViolationWindow, frameClassOf } from './rate-limit.ts';

export interface ConnectionDeps extends JobMessageDeps {
  authMode: 'token' | 'none';
  /** Silent this long (no `heartbeat`), the agent gets no new job; twice as long, its socket is closed. */
  silentMs: number;
  /** Storage and event requests (caches, provenance, events, the agent API). */
  requests: AgentRequests;
  validateToken: (token: string) => Promise<TokenInfo | null>;
  /** Reclaims the agent's in-flight jobs (docs/protocol.md#reconnect-reclaim-and-lost-attempts); runs after register.ack. */
  reclaim: (session: AgentSession, inFlight: { jobId: string; runId: string }[]) => Promise<void>;
  onUnknownType: (type: string) => void;
  /** An informational frame failed its schema (`switchyard_ws_invalid_informational_total{type}`). */
  onInvalidInformational: (type: string) => void;
  /** A job message refused by the ownership rule (`switchyard_ws_ownership_violations_total{cause}`). */
  onViolation: (cause: OwnershipCause) => void;
  /** An `agent.metrics` report, re-exported as `switchyard_agent_*`. */
  onAgentMetrics: (agentId: string, metrics: AgentMessageOf<'agent.metrics'>['metrics']) => void;
  /** A scaler bound a waiting job to this agent: `register.ack` carries `pendingDispatch: true` (SCL-3). */
  hasPendingDispatch?: (agentId: string) => boolean;
}

type Phase = 'auth' | 'register' | 'ready' | 'closed';

const AUTH_TIMEOUT_MS = 5_000;
const REGISTER_TIMEOUT_MS = 10_000;
/** The liveness watch looks at least this often, and nine times per silence threshold. */
const WATCH_AT_MOST_EVERY_MS = 10_000;
const MAX_HELD_FRAMES = 256;
/** Why a session that just registered with `inFlightJobs` is not offered jobs yet. */
export const RECLAIMING = 'reclaiming';
/** Log bytes waiting for the database beyond which the socket is paused until they are down to the low mark. */
const LOG_BACKLOG_HIGH = 8 * 1024 * 1024;
const LOG_BACKLOG_LOW = 2 * 1024 * 1024;
/**
 * Frames this coordinator sends are compressed from this size up (the agent's offer is accepted,
 * so its frames are inflated at any size). ws's own `threshold` applies only without context
 * takeover, which the agent does not ask for, so each send says whether to compress. A dispatch of
 * a few KiB goes as is: deflating it here and inflating it at the agent would be two trips through
 * the zlib threads on the way of every dispatch to save a couple of KiB on the wire; a large frame
 * is still compressed.
 */
export const COMPRESS_FROM_BYTES = 16 * 1024;

/** Routine close codes; any other close of an agent's socket is logged as a warning. */
const QUIET_CLOSES: ReadonlySet<number> = new Set([CLOSE_CODES.NORMAL, CLOSE_CODES.GOING_AWAY]);
/** Job messages a reconnecting stock agent sends before its register.ack (docs/protocol.md#register-gates). */
const HOLDABLE = new Set(['job.status', 'step.status']);

/**
 * One agent socket: handshake, register gates, liveness and routing. It holds no run state;
 * each job message becomes one event for the owning run actor (docs/protocol.md#endpoints-and-transport).
 */
export class AgentConnection {
  readonly connectionId = randomUUID();
  private phase: Phase;
  private token: TokenInfo | null = null;
  private session: AgentSession | null = null;
  private held: JobScopedMessage[] = [];
  private timer: NodeJS.Timeout | null = null;
  private watchdog: NodeJS.Timeout | null = null;
  private lastHeartbeatAt: number;
  private readonly limits: ConnectionLimits;
  private readonly violations = new ViolationWindow();
  private chain: Promise<void> = Promise.resolve();
  private readonly jobs: JobFrames;
  /** Why reading is paused (rate-limit debt, log backlog); the socket resumes when none is left. */
  private holds = 0;
  private rateHoldUntil = 0;
  private lastWarningAt = Number.NEGATIVE_INFINITY;
  private readonly log: Logger;

  constructor(
    private readonly socket: WebSocket,
    private readonly deps: ConnectionDeps,
  ) {
    this.log = deps.log.child({ connectionId: this.connectionId });
    this.lastHeartbeatAt = deps.now();
    this.limits = new ConnectionLimits(deps.now());
    this.jobs = new JobFrames({ ...deps, log: this.log });
    this.phase = deps.authMode === 'none' ? 'register' : 'auth';
    this.arm(deps.authMode === 'none' ? REGISTER_TIMEOUT_MS : AUTH_TIMEOUT_MS, deps.authMode === 'none' ? 'Register timeout' : 'Auth timeout');
    socket.on('message', (data, isBinary) => this.receive(data as Buffer, isBinary));
    socket.on('close', () => this.closed());
    socket.on('error', (error) => this.log.warn({ err: error }, 'agent socket error'));
  }

  private receive(data: Buffer, isBinary: boolean): void {
    if (this.phase === 'closed') return;
    if (isBinary) return this.close(CLOSE_CODES.INVALID_MESSAGE, 'Binary frames are not allowed');
    const now = this.deps.now();
    if (this.session) this.session.lastFrameAt = now;
    if (data.length > ConnectionLimits.SINGLE_MESSAGE_MAX) return this.close(CLOSE_CODES.INVALID_MESSAGE, 'Message too large');
    const parsed = parseAgentMessage(data.toString('utf8'));
    if (!parsed.ok && parsed.unknownType !== true && parsed.informational !== true) return this.refuseFrame(parsed.reason);
    if (!this.admit(parsed, data.length, now)) return;
    if (!parsed.ok) {
      if (parsed.unknownType) return this.deps.onUnknownType(parsed.type ?? 'unknown');
      return this.invalidInformational(parsed.type ?? 'unknown', parsed.reason);
    }
    // Frames of one socket are routed in arrival order; routing does not wait for durability.
    this.chain = this.chain.then(() => this.route(parsed.message)).catch((thrown: unknown) => {
      this.log.error({ err: coerceError(thrown), type: parsed.message.type }, 'agent message failed');
    });
  }

  /**
   * The rate limit (docs/protocol.md#endpoints-and-transport): a frame that settles a job, answers a request or belongs to
   * the handshake is never dropped: it is taken and the socket stops reading until the debt is paid.
   */
  private admit(parsed: ParseResult<AgentMessage>, size: number, now: number): boolean {
    const type = parsed.ok ? parsed.message.type : parsed.type;
    const verdict = this.limits.check(frameClassOf(type, parsed.ok || parsed.informational === true), size, now);
    switch (verdict.kind) {
      case 'ok':
        return true;
      case 'pause':
        this.pauseFor(verdict.ms, now);
        return true;
      case 'drop':
        this.warnRateLimited(verdict.retryAfterMs, now);
        return false;
      case 'close':
        this.close(CLOSE_CODES.INVALID_MESSAGE, 'Rate limit exceeded');
        return false;
    }
  }

  /** One `rate.limit.warning` per window, however many frames the window drops. */
  private warnRateLimited(retryAfterMs: number, now: number): void {
    if (now - this.lastWarningAt < retryAfterMs) return;
    this.lastWarningAt = now;
    this.send({ type: 'rate.limit.warning', retryAfterMs });
  }

  private pauseFor(ms: number, now: number): void {
    if (now + ms <= this.rateHoldUntil) return;
    this.rateHoldUntil = now + ms;
    this.hold(new Promise((resolve) => setTimeout(resolve, ms)));
  }

  /** Stops reading the socket until `until` settles (ws may still emit frames it had already read). */
  private hold(until: Promise<unknown>): void {
    if (this.phase === 'closed') return;
    this.holds += 1;
    if (this.holds === 1) this.socket.pause();
    const release = () => {
      this.holds -= 1;
      if (this.holds === 0 && this.phase !== 'closed') this.socket.resume();
    };
    until.then(release, release);
  }

  private refuseFrame(reason: string): void {
    this.log.warn({ reason }, 'invalid agent frame');
    this.send({ type: 'error', code: 'invalid_message', message: reason });
    this.close(CLOSE_CODES.INVALID_MESSAGE, reason);
  }

  /** Informational frames and storage requests settle no job, so a broken one never costs the agent its socket. */
  private invalidInformational(type: string, reason: string): void {
    this.log.warn({ type, reason }, 'invalid informational agent frame ignored');
    this.deps.onInvalidInformational(type);
    // A broken request is told why; the agent's own timeout ends its wait for an answer.
    if (!INFORMATIONAL_AGENT_TYPES.has(type)) this.send({ type: 'error', code: 'invalid_message', message: reason });
  }

  private async route(message: AgentMessage): Promise<void> {
    if (this.phase === 'closed') return;
    if (this.phase === 'auth') return this.authenticate(message);
    if (message.type === 'agent.register') return this.register(message);
    if (this.phase === 'register') {
      if (HOLDABLE.has(message.type) && this.held.length < MAX_HELD_FRAMES) {
        this.held.push(message as JobScopedMessage);
        return;
      }
      // A reconnecting stock agent reports on any open socket: what settles nothing is not worth its socket.
      if (INFORMATIONAL_AGENT_TYPES.has(message.type)) return this.log.debug({ type: message.type }, 'informational frame before agent.register ignored');
      return this.close(CLOSE_CODES.INVALID_MESSAGE, 'Expected agent.register');
    }
    return this.routeRegistered(message);
  }

  private async authenticate(message: AgentMessage): Promise<void> {
    if (message.type !== 'auth.request') return this.refuseAuth('Expected auth.request', CLOSE_CODES.AUTH_FAILED);
    if (message.protocolVersion < MIN_PROTOCOL_VERSION) return this.refuseAuth('Unsupported protocol version', CLOSE_CODES.PROTOCOL_ERROR);
    const token = await this.deps.validateToken(message.token);
    if (!token) return this.refuseAuth('Invalid or expired token', CLOSE_CODES.AUTH_FAILED);
    this.token = token;
    this.phase = 'register';
    this.send({ type: 'auth.success', connectionId: this.connectionId });
    this.arm(REGISTER_TIMEOUT_MS, 'Register timeout');
  }

  private refuseAuth(reason: string, code: number): void {
    this.log.info({ reason }, 'agent authentication refused');
    this.send({ type: 'auth.failure', reason });
    this.close(code, reason);
  }

  private async register(message: AgentMessageOf<'agent.register'>): Promise<void> {
    const gate = checkRegisterGates(message, this.token, this.deps.registry.get(message.agentId), this.connectionId);
    if (!gate.ok) return this.refuseRegister(gate.code, gate.reason);
    const session = this.newSession(message, gate.handover);
    this.session = session;
    this.phase = 'ready';
    this.disarm();
    this.startWatchdog();
    // Asked before the session is offered jobs. Optional fields go absent, never false, as the stock agent sends them.
    const pendingDispatch = this.deps.hasPendingDispatch?.(session.agentId) === true;
    this.deps.registry.add(session);
    // The same token took the agentId over: the old socket goes, its jobs stay with this session.
    if (gate.handover && gate.handover.connectionId !== this.connectionId) {
      gate.handover.link.close(CLOSE_CODES.INVALID_MESSAGE, 'Replaced by a new connection');
    }
    this.send({ type: 'register.ack', agentId: session.agentId, labels: message.labels, scalerManaged: session.scalerManaged, ...(pendingDispatch && { pendingDispatch }) });
    this.log.info({ agentId: session.agentId, labels: session.labels, maxConcurrency: session.maxConcurrency }, 'agent registered');
    await this.deps.reclaim(session, message.inFlightJobs ?? []);
    this.deps.registry.markUsable(session.agentId, RECLAIMING);
    const held = this.held.splice(0);
    for (const frame of held) await this.jobMessage(frame);
  }

  private refuseRegister(code: number, reason: string): void {
    this.log.info({ reason }, 'agent registration refused');
    if (code === CLOSE_CODES.AUTH_FAILED) this.send({ type: 'auth.failure', reason });
    this.held = [];
    this.close(code, reason);
  }

  private newSession(message: AgentMessageOf<'agent.register'>, handover: AgentSession | undefined): AgentSession {
    const link = { send: (m: object) => this.send(m), close: (code: number, reason: string) => this.close(code, reason) };
    return {
      agentId: message.agentId,
      labels: message.labels,
      taints: this.token?.mandatoryLabels ?? [],
      properties: message.properties ?? {},
      connectionId: this.connectionId,
      tokenId: this.token?.id ?? null,
      maxConcurrency: message.maxConcurrency ?? 1,
      scalerManaged: handover?.scalerManaged ?? this.token?.agentType === 'ephemeral',
      // Until its in-flight jobs are reclaimed, its free slots are unknown: it is offered nothing new.
      unusable: (message.inFlightJobs?.length ?? 0) > 0 ? RECLAIMING : null,
      lastFrameAt: this.deps.now(),
      slots: handover?.slots ?? new Map<string, SlotHolder>(),
      sent: new Set(),
      link,
    };
  }

  private async routeRegistered(message: AgentMessage): Promise<void> {
    if (message.type === 'heartbeat') {
      this.lastHeartbeatAt = this.deps.now();
      if (this.session) this.deps.registry.markUsable(this.session.agentId, 'silent');
      return;
    }
    if (JOB_SCOPED_TYPES.has(message.type)) return this.jobMessage(message as JobScopedMessage);
    // A completion is stored before the frames after it (a build's job.status) are routed: its run's next jobs find the cache.
    if (isStorageRequest(message)) return message.type.endsWith('.complete') ? this.request(message) : void this.request(message);
    return this.otherMessage(message);
  }

  /** Answered beside the frame order (a slow store never holds up the job frames behind it), but for completions. */
  private async request(message: StorageRequest): Promise<void> {
    if (!this.session) return;
    const reply = await this.deps.requests.answer(this.session.agentId, message).catch((thrown: unknown) => {
      this.log.error({ err: coerceError(thrown), type: message.type }, 'agent request failed');
      return refusalFor(message, 'the request failed on the coordinator');
    });
    if (reply) this.send(reply);
  }

  private otherMessage(message: AgentMessage): void {
    if (message.type === 'step.approval-request') {
      const outcome = { outcome: 'rejected', reason: 'step approvals are not supported by this coordinator' };
      this.send({ type: 'step.approval-resolved', requestId: message.messageId, runId: message.runId, jobId: message.jobId, stepIndex: message.stepIndex, ...outcome });
      return;
    }
    if (message.type === 'agent.metrics' && this.session) return this.deps.onAgentMetrics(this.session.agentId, message.metrics);
    if (message.type === 'agent.status' && this.session && message.activeJobs !== this.session.slots.size) {
      this.log.debug({ reported: message.activeJobs, slots: this.session.slots.size }, 'agent.status disagrees with slot count (advisory)');
    }
  }

  private async jobMessage(message: JobScopedMessage): Promise<void> {
    if (!this.session) return;
    const { agentId } = this.session;
    const outcome = await this.jobs.handle(agentId, message);
    if (this.jobs.logBacklogBytes > LOG_BACKLOG_HIGH) this.hold(this.jobs.logsBelow(LOG_BACKLOG_LOW));
    if (outcome.ok) return;
    if (message.type === 'job.concurrency.report') {
      // The stock agent waits 30 s for an answer: one that holds no such job is told at once.
      const reason = `job ${message.jobId} is not an attempt this agent holds`;
      this.send({ type: 'job.concurrency.ack', requestId: message.messageId, action: 'cancel', reason, runId: message.runId, jobId: message.jobId });
    }
    this.deps.onViolation(outcome.cause);
    const fields = { agentId, dispatchId: message.jobId, type: message.type, cause: outcome.cause };
    // Only another agent's attempt is a violation; an agent's own old attempts are what it replays after a reconnect.
    if (outcome.cause !== 'other_agent') return this.log.debug(fields, 'job message for an attempt that is over or unknown; dropped');
    this.log.warn(fields, 'job message from an agent that does not own the attempt; dropped');
    if (this.violations.record(this.deps.now())) this.close(CLOSE_CODES.INVALID_MESSAGE, 'Repeated ownership violations');
  }

  private startWatchdog(): void {
    const { silentMs } = this.deps;
    this.watchdog ??= setInterval(() => {
      const silent = this.deps.now() - this.lastHeartbeatAt;
      if (silent > 2 * silentMs) this.close(CLOSE_CODES.HEARTBEAT_TIMEOUT, 'Heartbeat timeout');
      else if (silent > silentMs && this.session && this.session.unusable === null) {
        this.session.unusable = 'silent';
        this.log.warn({ agentId: this.session.agentId, silentMs: silent }, 'agent unhealthy: no heartbeat');
      }
    }, Math.min(WATCH_AT_MOST_EVERY_MS, Math.ceil(silentMs / 9)));
  }

  send(message: object): void {
    if (this.socket.readyState !== this.socket.OPEN) return;
    const text = JSON.stringify(message);
    this.socket.send(text, { compress: Buffer.byteLength(text) >= COMPRESS_FROM_BYTES });
  }

  close(code: number, reason: string): void {
    if (this.phase === 'closed') return;
    if (!QUIET_CLOSES.has(code)) this.log.warn({ agentId: this.session?.agentId, code, reason }, 'closing agent socket');
    // A paused socket would not read the agent's close frame back.
    if (this.socket.isPaused) this.socket.resume();
    this.socket.close(code, truncateCloseReason(reason));
    this.closed();
  }

  private arm(ms: number, reason: string): void {
    this.disarm();
    this.timer = setTimeout(() => this.close(CLOSE_CODES.AUTH_OR_REGISTER_TIMEOUT, reason), ms);
  }

  private disarm(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }

  private closed(): void {
    if (this.phase === 'closed') return;
    this.phase = 'closed';
    this.disarm();
    if (this.watchdog) clearInterval(this.watchdog);
    const session = this.session;
    if (!session) return;
    const jobs = this.deps.registry.remove(session.agentId, this.connectionId);
    this.log.info({ agentId: session.agentId, jobs: jobs.length }, 'agent disconnected');
    for (const job of jobs) {
      void this.deps.deliver(job.runId, { type: 'agent.disconnected', jobKey: job.jobKey, agentId: session.agentId, connectionId: this.connectionId }).catch((thrown: unknown) => {
        this.log.error({ err: coerceError(thrown), runId: job.runId }, 'disconnect triage failed');
      });
    }
  }
}
