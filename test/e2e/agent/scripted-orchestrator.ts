import type { AddressInfo } from 'node:net';
import { WebSocketServer, type WebSocket } from 'ws';
import {
  parseAgentMessage,
  type AgentMessage,
  type AgentMessageOf,
  type AgentMessageType,
  type AgentRegister,
  type OrchestratorMessage,
} from '../../../src/ws/messages.ts';

/**
 * The orchestrator side of protocol v1, played by a test: every frame the agent sends is parsed
 * with the shared schemas (a schema failure fails the test) and kept in order.
 */
export class ScriptedOrchestrator {
  readonly connections: PeerConnection[] = [];
  private waiters: ((connection: PeerConnection) => void)[] = [];

  private constructor(private readonly server: WebSocketServer) {
    server.on('connection', (socket) => {
      const connection = new PeerConnection(socket);
      this.connections.push(connection);
      const waiters = this.waiters;
      this.waiters = [];
      for (const resolve of waiters) resolve(connection);
    });
  }

  static async start(): Promise<ScriptedOrchestrator> {
    const server = new WebSocketServer({ host: '127.0.0.1', port: 0, path: '/ws/agent' });
    await new Promise<void>((resolve) => server.once('listening', () => resolve()));
    return new ScriptedOrchestrator(server);
  }

  get url(): string {
    return `ws://127.0.0.1:${(this.server.address() as AddressInfo).port}/ws/agent`;
  }

  /** The connection number `index` (0-based), waiting for it to open. */
  async connection(index: number, timeoutMs = 10_000): Promise<PeerConnection> {
    const deadline = Date.now() + timeoutMs;
    while (this.connections.length <= index) {
      const remaining = deadline - Date.now();
      if (remaining <= 0) throw new Error(`connection #${index} did not open within ${timeoutMs} ms`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, remaining);
        this.waiters.push(() => (clearTimeout(timer), resolve()));
      });
    }
    return this.connections[index] as PeerConnection;
  }

  async close(): Promise<void> {
    for (const client of this.server.clients) client.terminate();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

export class PeerConnection {
  readonly received: AgentMessage[] = [];
  readonly closed: Promise<{ code: number; reason: string }>;
  private listeners: (() => void)[] = [];

  constructor(readonly socket: WebSocket) {
    socket.on('message', (data: Buffer) => {
      const parsed = parseAgentMessage(data.toString('utf8'));
      if (!parsed.ok) throw new Error(`agent sent an invalid frame: ${parsed.reason}`);
      this.received.push(parsed.message);
      for (const listener of this.listeners) listener();
    });
    this.closed = new Promise((resolve) => socket.once('close', (code, reason) => resolve({ code, reason: reason.toString() })));
  }

  send(message: OrchestratorMessage): void {
    this.socket.send(JSON.stringify(message));
  }

  /** The first message (already received or still to come) of `type` that matches `where`. */
  async next<T extends AgentMessageType>(
    type: T,
    where: (message: AgentMessageOf<T>) => boolean = () => true,
    timeoutMs = 15_000,
  ): Promise<AgentMessageOf<T>> {
    const find = () =>
      this.received.find((m): m is AgentMessageOf<T> => m.type === type && where(m as AgentMessageOf<T>));
    const deadline = Date.now() + timeoutMs;
    for (let found = find(); ; found = find()) {
      if (found !== undefined) return found;
      const remaining = deadline - Date.now();
      if (remaining <= 0) throw new Error(`no ${type} within ${timeoutMs} ms; got ${this.types().join(', ')}`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(done, remaining);
        const listeners = this.listeners;
        function done() {
          clearTimeout(timer);
          listeners.splice(listeners.indexOf(done), 1);
          resolve();
        }
        listeners.push(done);
      });
    }
  }

  /** Plays the handshake of protocol.md §4 and returns the agent's register message. */
  async handshake(): Promise<AgentRegister> {
    const auth = await this.next('auth.request');
    if (auth.protocolVersion !== 1) throw new Error(`unexpected protocolVersion ${auth.protocolVersion}`);
    this.send({ type: 'auth.success', connectionId: crypto.randomUUID() });
    const register = await this.next('agent.register');
    this.send({ type: 'register.ack', agentId: register.agentId, labels: register.labels, scalerManaged: false });
    return register;
  }

  types(): string[] {
    return this.received.map((m) => m.type);
  }

  /** Messages about one job, in arrival order. */
  forJob(jobId: string): AgentMessage[] {
    return this.received.filter((m) => 'jobId' in m && m.jobId === jobId);
  }
}
