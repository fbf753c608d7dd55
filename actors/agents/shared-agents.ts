import type { Logger } from 'pino';
import type { AgentRegistry, AgentSession } from './registry.ts';
import { coerceError } from '../../lib/errors.ts';

/** What another coordinator needs of an agent to place a job on it and to reach its socket. */
export interface SharedSession {
  agentId: string;
  coordinatorId: string;
  connectionId: string;
  labels: string[];
  properties: Record<string, string | number | boolean>;
  taints: string[];
  maxConcurrency: number;
  scalerManaged: boolean;
}

/**
 * A command for an agent whose socket another coordinator holds: a frame, or a slot or socket change.
 * A cancel left this way is asked about by its id (`commandsWaiting`) while its job is fenced (machines/job.withdrawal.ts).
 */
export type AgentCommand =
  | { kind: 'frame'; frame: object; dispatchId: string | null }
  | { kind: 'release'; dispatchId: string }
  | { kind: 'close'; code: number; reason: string };

export interface QueuedAgentCommand {
  id: number;
  agentId: string;
  command: AgentCommand;
}

/** The sessions and commands every coordinator on the database shares (src/db implements it, FO-3). */
export interface SharedAgentStore {
  announce(session: SharedSession & { tokenId: string | null }): Promise<void>;
  forget(agentId: string, connectionId: string): Promise<void>;
  /** The agent's session on a live coordinator, wherever it is. */
  sessionOf(agentId: string): Promise<SharedSession | null>;
  /** Leaves the command for the coordinator holding the agent's socket; returns its id. */
  send(coordinatorId: string, agentId: string, command: AgentCommand): Promise<number>;
  /** Of these commands, those still waiting to be carried out by a live coordinator. */
  commandsWaiting(ids: readonly number[]): Promise<Set<number>>;
  peekCommands(limit: number): Promise<QueuedAgentCommand[]>;
  removeCommands(ids: number[]): Promise<void>;
  /** Sessions of coordinators whose lease ran out, removed; their agents' sockets are gone. */
  clearDeadSessions(): Promise<DeadSession[]>;
}

/** An agent's socket on a coordinator that died. */
export interface DeadSession {
  agentId: string;
  connectionId: string;
}

const BATCH = 200;

/**
 * This coordinator's side of shared agents: it records its sessions for the others, carries out the
 * commands they leave for its agents, and sends commands for agents whose socket is elsewhere.
 */
export class SharedAgents {
  private draining: Promise<void> | null = null;
  private drainAgain = false;
  /** Announce and forget of one agent are written in order, so a quick reconnect leaves the right row. */
  private readonly writes = new Map<string, Promise<void>>();

  constructor(
    readonly coordinatorId: string,
    private readonly store: SharedAgentStore,
    private readonly registry: AgentRegistry,
    private readonly log: Logger,
    /** An agent that sent a frame this recently is alive (the dispatch ack timeout). */
    private readonly aliveWindowMs: number,
    /** Opens a frame a peer sealed for the trip (its secret fields); null when it cannot be opened here. */
    private readonly openFrame: (frame: object) => object | null = (frame) => frame,
  ) {
    registry.observeSessions({
      added: (session) => this.inOrder(session.agentId, () => this.store.announce(shareable(coordinatorId, session)), 'announcing a session'),
      removed: (session) => this.inOrder(session.agentId, () => this.store.forget(session.agentId, session.connectionId), 'forgetting a session'),
    });
  }

  /** The agent's session on another coordinator, or null (unknown, or connected here). */
  async remoteSession(agentId: string): Promise<SharedSession | null> {
    if (this.registry.get(agentId)) return null;
    const session = await this.store.sessionOf(agentId);
    return session && session.coordinatorId !== this.coordinatorId ? session : null;
  }

  /**
   * Whether the agent has a socket here or a session on another live coordinator. Unlike
   * `isConnectedAnywhere`, a session row of this coordinator with no socket in the registry (one
   * just closed) does not count.
   */
  async hasSocket(agentId: string): Promise<boolean> {
    return this.registry.get(agentId) !== undefined || (await this.remoteSession(agentId)) !== null;
  }

  /** Whether the agent has a session on a live coordinator, here or elsewhere. */
  async isConnectedAnywhere(agentId: string): Promise<boolean> {
    return this.registry.get(agentId) !== undefined || (await this.store.sessionOf(agentId)) !== null;
  }

  /** Returns the command's id (`commandsWaiting` tells when it has been carried out). */
  send(session: SharedSession, command: AgentCommand): Promise<number> {
    return this.store.send(session.coordinatorId, session.agentId, command);
  }

  /** Of the commands sent with `send`, those still waiting for a live coordinator to carry them out. */
  commandsWaiting(ids: readonly number[]): Promise<Set<number>> {
    return this.store.commandsWaiting(ids);
  }

  /** A slot reserved here is freed here; one a peer reserved (for a grant it gave) is freed by that peer. */
  async release(agentId: string, dispatchId: string): Promise<void> {
    if (this.registry.dispatchOf(dispatchId) || this.registry.get(agentId)) {
      this.registry.release(agentId, dispatchId);
      return;
    }
    const remote = await this.remoteSession(agentId);
    if (remote) await this.send(remote, { kind: 'release', dispatchId });
  }

  /** Carries out the commands peers left for agents connected here, oldest first. */
  drainCommands(): Promise<void> {
    if (this.draining) {
      this.drainAgain = true;
      return this.draining;
    }
    this.draining = this.drainLoop().finally(() => (this.draining = null));
    return this.draining;
  }

  clearDeadSessions(): Promise<DeadSession[]> {
    return this.store.clearDeadSessions();
  }

  private async drainLoop(): Promise<void> {
    do {
      this.drainAgain = false;
      const commands = await this.store.peekCommands(BATCH);
      for (const queued of commands) this.carryOut(queued.agentId, queued.command);
      await this.store.removeCommands(commands.map((c) => c.id));
      if (commands.length === BATCH) this.drainAgain = true;
    } while (this.drainAgain);
  }

  private carryOut(agentId: string, command: AgentCommand): void {
    const session = this.registry.get(agentId);
    switch (command.kind) {
      case 'release':
        this.registry.release(agentId, command.dispatchId);
        return;
      case 'close':
        // The owner's ack deadline passed; as for a local agent, only a silent one loses its socket.
        if (session && !this.registry.closeIfSilent(agentId, command.code, command.reason, this.aliveWindowMs)) {
          this.log.warn({ agentId, reason: command.reason }, 'agent missed its ack deadline but is alive; socket kept');
        }
        return;
      case 'frame':
        if (session) this.sendFrame(session, command);
        return;
    }
  }

  /** A dispatch goes out once, and only on the connection its slot was reserved on. */
  private sendFrame(session: AgentSession, command: Extract<AgentCommand, { kind: 'frame' }>): void {
    const { dispatchId } = command;
    if (dispatchId !== null) {
      const slot = this.registry.dispatchOf(dispatchId);
      if (session.sent.has(dispatchId) || slot?.connectionId !== session.connectionId || slot.endedAt !== null) return;
    }
    const frame = this.openFrame(command.frame);
    if (frame === null) {
      this.log.error({ agentId: session.agentId, dispatchId }, 'a peer’s dispatch could not be opened here (another master key?); not sent');
      return;
    }
    if (dispatchId !== null) session.sent.add(dispatchId);
    session.link.send(frame);
  }

  private inOrder(agentId: string, work: () => Promise<void>, what: string): void {
    const previous = this.writes.get(agentId) ?? Promise.resolve();
    const next = previous.then(work).catch((thrown: unknown) => this.log.warn({ err: coerceError(thrown), agentId }, `${what} failed`));
    this.writes.set(agentId, next);
    void next.finally(() => {
      if (this.writes.get(agentId) === next) this.writes.delete(agentId);
    });
  }
}

function shareable(coordinatorId: string, session: AgentSession): SharedSession & { tokenId: string | null } {
  return {
    agentId: session.agentId,
    coordinatorId,
    connectionId: session.connectionId,
    labels: [...session.labels],
    properties: { ...session.properties },
    taints: [...session.taints],
    maxConcurrency: session.maxConcurrency,
    scalerManaged: session.scalerManaged,
    tokenId: session.tokenId,
  };
}
