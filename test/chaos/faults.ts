import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { WebSocket } from 'ws';
import type { ChaosAgent } from './agent.ts';
import type { ChaosCoordinator } from './cluster.ts';
import type { Rng } from './rng.ts';

export type FaultKind =
  | 'coordinator SIGKILL'
  | 'coordinator SIGSTOP'
  | 'agent killed mid-job'
  | 'agent disconnected mid-job'
  | 'Postgres connections reset'
  | 'garbage frame burst';

export interface FaultTargets {
  coordinators: readonly ChaosCoordinator[];
  agents: () => readonly ChaosAgent[];
  /** Replaces a killed agent with a new one (a new process, a new id). */
  replaceAgent: (dead: ChaosAgent) => void;
  databaseUrl: string;
  /** The recovery window: some disconnects outlast it on purpose. */
  recoveryWindowMs: number;
}

const KINDS: readonly FaultKind[] = [
  'coordinator SIGKILL',
  'coordinator SIGSTOP',
  'agent killed mid-job',
  'agent disconnected mid-job',
  'agent disconnected mid-job',
  'Postgres connections reset',
  'garbage frame burst',
];

/**
 * Injects one fault at a time and keeps score. Faults come in rounds, each kind once per round in a
 * random order, so even a short run sees every kind. Coordinators that are down come back after a
 * random delay (the keeper), so at least one is up again soon; a fault that finds no target (no busy
 * agent, every coordinator already in trouble) is skipped and not counted.
 */
export class FaultInjector {
  readonly counts = new Map<FaultKind, number>();
  readonly garbageCloseCodes = new Map<number, number>();
  private readonly restartAt = new Map<string, number>();
  private readonly pending = new Set<Promise<unknown>>();
  private bag: FaultKind[] = [];
  private keeper: NodeJS.Timeout | undefined;

  constructor(
    private readonly targets: FaultTargets,
    private readonly rng: Rng,
    private readonly log: (line: string) => void,
  ) {}

  /** Restarts coordinators that are down once their restart time has come. */
  startKeeper(): void {
    this.keeper = setInterval(() => {
      for (const coordinator of this.targets.coordinators) {
        if (coordinator.state !== 'down' || (this.restartAt.get(coordinator.id) ?? 0) > Date.now()) continue;
        this.restartAt.set(coordinator.id, Date.now() + 60_000);
        this.log(`restarting ${coordinator.id}`);
        this.track(coordinator.start().then((ok) => this.restartAt.set(coordinator.id, ok ? 0 : Date.now() + 1000)));
      }
    }, 200);
  }

  async stopAndSettle(): Promise<void> {
    clearInterval(this.keeper);
    while (this.pending.size > 0) await Promise.allSettled([...this.pending]);
    for (const coordinator of this.targets.coordinators) {
      coordinator.resume();
      if (coordinator.state === 'up' && !(await fetch(`${coordinator.url}/readyz`).catch(() => null))?.ok) await coordinator.exited(5_000);
      if (coordinator.state === 'down' && !(await coordinator.start())) throw new Error(`${coordinator.id} did not come back up`);
    }
  }

  /** Injects the next fault of the round; one without a target now stays next in line. */
  inject(): void {
    if (this.bag.length === 0) this.bag = this.rng.shuffle([...KINDS]);
    const kind = this.bag[0] as FaultKind;
    const done = this.apply(kind);
    if (done === null) return;
    this.bag.shift();
    this.counts.set(kind, (this.counts.get(kind) ?? 0) + 1);
    this.track(done.catch((error: unknown) => this.log(`fault ${kind} failed: ${String(error)}`)));
  }

  private apply(kind: FaultKind): Promise<unknown> | null {
    switch (kind) {
      case 'coordinator SIGKILL':
        return this.withHealthyCoordinator((c) => this.killCoordinator(c));
      case 'coordinator SIGSTOP':
        return this.withHealthyCoordinator((c) => this.stopCoordinator(c));
      case 'agent killed mid-job':
        return this.withBusyAgent((agent) => {
          agent.kill();
          return sleep(this.rng.int(200, 1500)).then(() => this.targets.replaceAgent(agent));
        });
      case 'agent disconnected mid-job':
        return this.withBusyAgent((agent) => {
          const window = this.targets.recoveryWindowMs;
          agent.disconnect(this.rng.chance(0.8) ? this.rng.int(100, window / 2) : this.rng.int(window, window * 1.5));
          return Promise.resolve();
        });
      case 'Postgres connections reset':
        this.log('Postgres connections reset (every backend of the database terminated)');
        return resetConnections(this.targets.databaseUrl);
      case 'garbage frame burst':
        return this.withHealthyCoordinator((c) => this.garbage(c), true);
    }
  }

  /** A coordinator that is up while every other one is up too (so one always carries on). */
  private withHealthyCoordinator(fault: (c: ChaosCoordinator) => Promise<unknown>, anyUp = false): Promise<unknown> | null {
    const up = this.targets.coordinators.filter((c) => c.state === 'up');
    if (up.length === 0 || (!anyUp && up.length < this.targets.coordinators.length)) return null;
    return fault(this.rng.pick(up));
  }

  private withBusyAgent(fault: (agent: ChaosAgent) => Promise<unknown>): Promise<unknown> | null {
    const busy = this.targets.agents().filter((a) => !a.dead && a.online && a.busy);
    return busy.length === 0 ? null : fault(this.rng.pick(busy));
  }

  private async killCoordinator(coordinator: ChaosCoordinator): Promise<void> {
    this.restartAt.set(coordinator.id, Date.now() + this.rng.int(300, 2500));
    this.log(`SIGKILL ${coordinator.id}`);
    coordinator.kill9();
    await coordinator.exited();
  }

  /** Stopped for longer than the lease TTL more often than not, so the other one adopts its runs. */
  private async stopCoordinator(coordinator: ChaosCoordinator): Promise<void> {
    const ms = this.rng.int(300, 3500);
    this.restartAt.set(coordinator.id, Date.now() + ms + this.rng.int(200, 1500));
    this.log(`SIGSTOP ${coordinator.id} for ${ms} ms`);
    coordinator.stop();
    await sleep(ms);
    coordinator.resume();
  }

  private async garbage(coordinator: ChaosCoordinator): Promise<void> {
    const socket = new WebSocket(coordinator.wsUrl, { handshakeTimeout: 2000 });
    socket.on('error', () => undefined);
    const closed = new Promise<number>((resolve) => socket.once('close', (code) => resolve(code)));
    const opened = await new Promise<boolean>((resolve) => {
      socket.once('open', () => resolve(true));
      socket.once('close', () => resolve(false));
    });
    if (opened) {
      for (let i = this.rng.int(10, 60); i > 0 && socket.readyState === WebSocket.OPEN; i--) socket.send(this.garbageFrame(), { binary: this.rng.chance(0.3) });
    }
    const code = await Promise.race([closed, sleep(3000).then(() => -1)]);
    socket.terminate();
    this.garbageCloseCodes.set(code, (this.garbageCloseCodes.get(code) ?? 0) + 1);
  }

  private garbageFrame(): string | Buffer {
    return this.rng.weighted<string | Buffer>([
      [3, randomBytes(this.rng.int(1, 512))],
      [3, '{"type":"job.status","runId":'],
      [2, JSON.stringify({ type: 'agent.register', agentId: 42, labels: 'linux' })],
      [2, JSON.stringify({ type: 'job.ack', runId: 'x'.repeat(300), jobId: null })],
      [1, '\u0000\uffff'.repeat(100)],
      [1, JSON.stringify({ type: 'heartbeat', nested: nested(2000) })],
    ]);
  }

  private track(promise: Promise<unknown>): void {
    this.pending.add(promise);
    void promise.finally(() => this.pending.delete(promise));
  }
}

/** Terminates every server connection to the chaos database (the coordinators' pools) at once. */
async function resetConnections(databaseUrl: string): Promise<void> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    await client.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()');
  } finally {
    await client.end();
  }
}

function nested(depth: number): unknown {
  let value: unknown = 0;
  for (let i = 0; i < depth; i++) value = [value];
  return value;
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
