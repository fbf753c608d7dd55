import type { Logger } from 'pino';
import { coerceError } from '../../lib/errors.ts';
import type { Clock } from '../clock.ts';
import type { PlacementExchange } from './placement-exchange.ts';
import type { AgentRegistry } from './registry.ts';
import type { SharedAgents } from './shared-agents.ts';

/** A subscription to peers' signals; `close` ends it. */
export interface PeerSubscription {
  close(): Promise<void>;
}

/** Subscribes to this coordinator's wake-ups from peers (`inbox`, `agents`, `placement`, `joined`, `secrets`, `repositories`, `reconnected`). */
export type ListenForPeers = (onSignal: (payload: string) => void) => PeerSubscription;

/** A job here held by an agent: the peers' loop asks about its agent when that agent's coordinator died. */
export interface HeldJob {
  runId: string;
  jobKey: string;
  agentId: string;
}

export interface PeerSyncPorts {
  shared: SharedAgents;
  exchange: PlacementExchange;
  registry: AgentRegistry;
  /** Jobs of runs owned here that hold an agent slot. */
  heldJobs(): HeldJob[];
  /** The socket (`connectionId`) of a held job's agent died with its coordinator: the job goes recovering, unless it was reclaimed on another socket. */
  agentLost(job: HeldJob, connectionId: string): Promise<void>;
  /** The run inbox has events for runs here. */
  wakeInbox(): void;
  /** Stored secrets or repositories may have changed (a peer's signal; 'all' on a reconnect or the poll): what was read of them is stale. */
  forgetReads(what: 'secrets' | 'repositories' | 'all'): void;
  /** Sessions this coordinator recorded before a restart under the same id; at `start`, a transient database error is tried again. */
  clearOwnSessions(when: 'start' | 'stop'): Promise<void>;
  /** How often peers' tables are read without a signal. */
  pollMs: number;
  clock: Clock;
  log: Logger;
}

/**
 * Coordinators on one database share their agents (FO-3): sessions are recorded for peers, jobs no
 * agent here can take are offered to peers' agents, and commands for an agent go to the coordinator
 * holding its socket. A signal wakes the reader; a slow poll covers signals lost in a reconnect.
 */
export class PeerSync {
  private timer: unknown = null;
  private subscription: PeerSubscription | null = null;

  constructor(private readonly ports: PeerSyncPorts) {}

  /** A restart under the same id first forgets its old sessions, so restored jobs see their agents gone. */
  async start(listen?: ListenForPeers): Promise<void> {
    await this.ports.clearOwnSessions('start');
    this.subscription = listen ? listen((payload) => this.onSignal(payload)) : null;
    this.schedule();
  }

  async stop(): Promise<void> {
    if (this.timer !== null) this.ports.clock.clearTimeout(this.timer);
    this.timer = null;
    await this.subscription?.close();
    await this.ports.clearOwnSessions('stop').catch(() => undefined);
  }

  private onSignal(payload: string): void {
    const again = payload === 'reconnected';
    if (payload === 'inbox' || again) this.ports.wakeInbox();
    if (payload === 'agents' || again) this.quietly(this.ports.shared.drainCommands(), 'carrying out agent commands');
    if (payload === 'placement' || again) this.quietly(this.ports.exchange.offerRemote(), 'offering agents to peers');
    if (payload === 'joined' || again) this.quietly(this.ports.exchange.checkPeers(), 'looking for peer coordinators');
    if (again) this.ports.forgetReads('all');
    else if (payload === 'secrets' || payload === 'repositories') this.ports.forgetReads(payload);
  }

  private schedule(): void {
    this.timer = this.ports.clock.setTimeout(() => this.poll(), this.ports.pollMs);
  }

  private poll(): void {
    this.quietly(this.ports.shared.drainCommands(), 'carrying out agent commands');
    this.quietly(this.ports.exchange.offerRemote(), 'offering agents to peers');
    this.quietly(this.disconnectDeadPeersAgents(), 'finding agents of dead coordinators');
    this.quietly(this.ports.exchange.checkPeers(), 'looking for peer coordinators');
    this.ports.forgetReads('all');
    if (this.timer !== null) this.schedule();
  }

  /** Jobs here on an agent whose coordinator died lost their socket with it: they go recovering. */
  private async disconnectDeadPeersAgents(): Promise<void> {
    const dead = new Map((await this.ports.shared.clearDeadSessions()).map((session) => [session.agentId, session.connectionId]));
    if (dead.size === 0) return;
    for (const job of this.ports.heldJobs()) {
      const connectionId = dead.get(job.agentId);
      if (connectionId !== undefined && !this.ports.registry.get(job.agentId)) await this.ports.agentLost(job, connectionId);
    }
  }

  private quietly(work: Promise<unknown>, what: string): void {
    void work.catch((thrown: unknown) => this.ports.log.warn({ err: coerceError(thrown) }, `${what} failed`));
  }
}
