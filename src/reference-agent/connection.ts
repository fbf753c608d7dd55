import type { Logger } from 'pino';
import { WebSocket, type RawData } from 'ws';
import {
  CLOSE_CODES,
  MAX_FRAME_BYTES,
  PROTOCOL_VERSION,
  parseOrchestratorMessage,
  type AgentMessage,
  type AgentRegister,
  type OrchestratorMessage,
  type RegisterAck,
} from '../ws/messages.ts';
import { reconnectDelayMs } from './backoff.ts';
import type { Link } from './outbox.ts';

export type ConnectionState = 'idle' | 'connecting' | 'authenticating' | 'registering' | 'registered' | 'backoff' | 'stopped';

export interface ConnectionOptions {
  /** One coordinator, or several of one database: a failed connection moves on to the next. */
  url: string | readonly string[];
  token?: string;
  heartbeatMs: number;
  reconnectBaseMs: number;
  reconnectCapMs: number;
}

export interface ConnectionHooks {
  /** Built afresh for every (re)register, so `inFlightJobs` is current. */
  registerMessage(): AgentRegister;
  onRegistered(ack: RegisterAck): void;
  onMessage(message: OrchestratorMessage): void;
  /** A frame that failed its schema; `job.dispatch` failures are worth answering. */
  onInvalidMessage(raw: string, reason: string, type: string | undefined): void;
  onDisconnected(): void;
  /** `auth.failure` or close 4010: the agent must never reconnect (docs/protocol.md#close-codes). */
  onPermanentFailure(reason: string): void;
}

/**
 * The agent's socket: authenticate, register, heartbeat while registered, reconnect with backoff
 * (docs/protocol.md#handshake). It holds no job state; the agent reacts through the hooks.
 */
export class AgentConnection implements Link {
  private socket: WebSocket | undefined;
  private current: ConnectionState = 'idle';
  private attempt = 0;
  private urlIndex = 0;
  private heartbeat: NodeJS.Timeout | undefined;
  private retry: NodeJS.Timeout | undefined;
  private authFailure: string | undefined;

  constructor(
    private readonly options: ConnectionOptions,
    private readonly hooks: ConnectionHooks,
    private readonly log: Logger,
    private readonly random: () => number = Math.random,
  ) {}

  get state(): ConnectionState {
    return this.current;
  }

  get registered(): boolean {
    return this.current === 'registered';
  }

  start(): void {
    if (this.current !== 'idle') throw new Error(`connection already started (${this.current})`);
    this.connect();
  }

  write(message: AgentMessage): Promise<boolean> {
    const socket = this.socket;
    if (socket === undefined || socket.readyState !== WebSocket.OPEN) return Promise.resolve(false);
    return new Promise((resolve) => socket.send(JSON.stringify(message), (error) => resolve(error === undefined)));
  }

  /** Intentional close (1000): no reconnect. Resolves once the socket is closed. */
  async close(): Promise<void> {
    this.setState('stopped');
    this.stopTimers();
    const socket = this.socket;
    if (socket === undefined || socket.readyState === WebSocket.CLOSED) return;
    await new Promise<void>((resolve) => {
      socket.once('close', () => resolve());
      socket.close(CLOSE_CODES.NORMAL, 'agent stopping');
      setTimeout(() => {
        socket.terminate();
        resolve();
      }, 2000).unref();
    });
  }

  private setState(next: ConnectionState): void {
    if (next === this.current) return;
    this.log.debug({ from: this.current, to: next }, 'connection state');
    this.current = next;
  }

  private get urls(): readonly string[] {
    return typeof this.options.url === 'string' ? [this.options.url] : this.options.url;
  }

  private connect(): void {
    this.setState('connecting');
    const url = this.urls[this.urlIndex % this.urls.length] ?? '';
    const socket = new WebSocket(url, { perMessageDeflate: { threshold: 128 }, maxPayload: MAX_FRAME_BYTES });
    this.socket = socket;
    socket.on('open', () => this.onOpen(socket));
    socket.on('message', (data, isBinary) => {
      if (isBinary) this.log.warn('binary frame ignored');
      else this.onFrame(socket, frameText(data));
    });
    socket.on('close', (code, reason) => this.onClose(socket, code, reason.toString('utf8')));
    socket.on('error', (error) => this.log.warn({ err: error.message }, 'socket error'));
  }

  private onOpen(socket: WebSocket): void {
    if (socket !== this.socket || this.current === 'stopped') return;
    const token = this.options.token;
    if (token !== undefined) {
      this.setState('authenticating');
      this.send({ type: 'auth.request', token, protocolVersion: PROTOCOL_VERSION });
    } else {
      this.register();
    }
  }

  private register(): void {
    this.setState('registering');
    this.send(this.hooks.registerMessage());
  }

  private send(message: AgentMessage): void {
    void this.write(message);
  }

  private onFrame(socket: WebSocket, raw: string): void {
    if (socket !== this.socket || this.current === 'stopped') return;
    const parsed = parseOrchestratorMessage(raw);
    if (!parsed.ok) {
      if (parsed.unknownType === true) this.log.debug({ type: parsed.type }, 'unknown message type ignored');
      else this.hooks.onInvalidMessage(raw, parsed.reason, parsed.type);
      return;
    }
    const message = parsed.message;
    switch (message.type) {
      case 'auth.success':
        this.register();
        return;
      case 'auth.failure':
        this.authFailure = message.reason;
        this.log.error({ reason: message.reason }, 'authentication failed');
        socket.close(CLOSE_CODES.NORMAL, 'auth failed');
        return;
      case 'register.ack':
        this.onRegisterAck(message);
        return;
      default:
        this.hooks.onMessage(message);
    }
  }

  private onRegisterAck(ack: RegisterAck): void {
    this.setState('registered');
    this.attempt = 0;
    clearInterval(this.heartbeat);
    this.heartbeat = setInterval(() => {
      if (this.registered) this.send({ type: 'heartbeat', timestamp: Date.now() });
    }, this.options.heartbeatMs);
    this.hooks.onRegistered(ack);
  }

  private onClose(socket: WebSocket, code: number, reason: string): void {
    if (socket !== this.socket) return;
    this.stopTimers();
    if (this.current === 'stopped') return;
    if (code === CLOSE_CODES.AUTH_FAILED || this.authFailure !== undefined) {
      this.setState('stopped');
      this.hooks.onPermanentFailure(this.authFailure ?? (reason || `closed ${code}`));
      return;
    }
    // With several coordinators the next one is tried at once; a full round without one backs off.
    this.urlIndex = (this.urlIndex + 1) % this.urls.length;
    const fullRound = this.urlIndex === 0;
    const delayMs = fullRound ? reconnectDelayMs(this.attempt, this.options.reconnectBaseMs, this.options.reconnectCapMs, this.random) : 0;
    if (fullRound) this.attempt += 1;
    this.log.warn({ code, reason, delayMs, attempt: this.attempt, next: this.urls[this.urlIndex] }, 'disconnected; reconnecting');
    this.setState('backoff');
    this.hooks.onDisconnected();
    this.retry = setTimeout(() => this.connect(), delayMs);
  }

  private stopTimers(): void {
    clearInterval(this.heartbeat);
    clearTimeout(this.retry);
    this.heartbeat = undefined;
    this.retry = undefined;
  }
}

function frameText(data: RawData): string {
  if (Buffer.isBuffer(data)) return data.toString('utf8');
  if (Array.isArray(data)) return Buffer.concat(data).toString('utf8');
  return Buffer.from(data).toString('utf8');
}
