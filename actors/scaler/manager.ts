import { randomBytes } from 'node:crypto';
import { createActor } from 'xstate';
import type { Actor } from 'xstate';
import type { Logger } from 'pino';
import { SCALER_MACHINE_VERSION, boundAgentOf, scalerMachineRecording, spareIdsWanted } from '../../machines/scaler.machine.ts';
import type { ScalerMachine } from '../../machines/scaler.machine.ts';
import type { BackendPlan, ScalerAgent, ScalerCaps, ScalerContext, ScalerEvent, ScalerIntent, ScalerTimeouts } from '../../machines/scaler.machine.ts';
import type { WaitingReason } from '../../machines/types.ts';
import type { ScalerBackend } from './ports.ts';
import { DIAGNOSE_WINDOW_MS } from './failure-tracker.ts';
import type { FailureTracker } from './failure-tracker.ts';
import type { ScalerMetrics } from './metrics.ts';
import type { AgentRegistry, AgentSession } from '../agents/registry.ts';
import { describeMatcher, type PlacementRequest, type ScalerPort } from '../agents/dispatcher.ts';
import { coerceError } from '../../lib/errors.ts';
import type { Clock } from '../clock.ts';
import { ScalerEffects } from './effects.ts';
import type { MintedToken, ScalerJobs } from './effects.ts';
import { candidatesFor, wrongExecutorBackends } from './placement.ts';
import { reapOrphans, releaseAbandoned } from './reaper.ts';
import type { ScalerStore } from './reaper.ts';
import { jobKeyOf } from '../../lib/job-key.ts';

export interface ScalerManagerOptions {
  backends: ScalerBackend[];
  caps: ScalerCaps;
  spawnTimeoutMs: number;
  tokenTtlMs: number;
  /** How often sessions are compared with the registry (disconnect grace) and orphan reaping is considered. */
  tickMs: number;
  store: ScalerStore;
  registry: AgentRegistry;
  jobs: ScalerJobs;
  deliver: ConstructorParameters<typeof ScalerEffects>[0]['deliver'];
  offer: () => void;
  mintToken(args: { agentId: string; labels: string[]; mandatoryLabels: string[]; expiresAt: number }): Promise<MintedToken>;
  revokeToken(tokenId: string): Promise<void>;
  tracker: FailureTracker;
  metrics: ScalerMetrics;
  clock: Clock;
  log: Logger;
  /** How long a registered agent may be without a session before it counts as lost (a restart's reconnect window). */
  disconnectGraceMs?: number;
  /** The same for an agent running a job: its job's recovery window, so a restart does not destroy it. */
  busyDisconnectGraceMs?: number;
  /** Orphan reaping and adoption of abandoned scaler states (SCL-11). */
  reapEveryMs?: number;
}

const TIMEOUTS: Omit<ScalerTimeouts, 'spawnMs'> = { boundIdleMs: 60_000, unboundIdleMs: 5_000 };
const STATES = ['spawning', 'idle', 'busy', 'destroying'] as const;

export function planOf(backend: ScalerBackend): BackendPlan {
  return {
    name: backend.name,
    type: backend.type,
    maxAgents: backend.maxAgents,
    maxCpu: backend.maxCpu ?? null,
    maxMemoryBytes: backend.maxMemoryBytes ?? null,
    labelSets: backend.labelSets.map((set) => ({
      resources: set.resources ?? { cpu: 0, memoryBytes: 0 },
      warm: set.warmPool ? { size: set.warmPool.size, idleTimeoutMs: set.warmPool.idleTimeoutSeconds * 1000 } : null,
    })),
  };
}

function suffix(): string {
  return randomBytes(4).toString('hex');
}

/**
 * Runs the scaler machine (docs/architecture.md#the-scaler) on the coordinator's clock: persists its snapshot
 * before any backend I/O it or an agent's deadline asks for, feeds it what happens to agents
 * (sessions, exits) and answers the dispatcher when no connected agent can take a job.
 */
export class ScalerManager implements ScalerPort {
  private actor: Actor<ScalerMachine> | null = null;
  private readonly backends: Map<string, ScalerBackend>;
  private readonly effects: ScalerEffects;
  private intents: ScalerIntent[] = [];
  private chain: Promise<void> = Promise.resolve();
  private changed = 0;
  private saved = 0;
  private fenced = false;
  private timer: unknown = null;
  private lastReap = 0;
  private readonly missingSince = new Map<string, number>();
  private readonly lastOutcome = new Map<string, string>();
  private resolveUrl: (url: string) => void = () => undefined;
  private readonly url = new Promise<string>((resolve) => (this.resolveUrl = resolve));

  constructor(private readonly options: ScalerManagerOptions) {
    this.backends = new Map(options.backends.map((backend) => [backend.name, backend]));
    this.effects = new ScalerEffects({ ...options, backends: this.backends, orchestratorUrl: () => this.url, send: (event) => this.send(event) });
    for (const backend of options.backends) backend.onExit((agentId, detail) => this.send({ type: 'scaler.agent.lost', agentId, reason: detail, at: options.clock.now() }));
    options.registry.onCapacity(() => this.syncSessions());
  }

  private machine() {
    return scalerMachineRecording((intent: ScalerIntent) => this.intents.push(intent));
  }

  get context(): ScalerContext | null {
    return this.actor?.getSnapshot().context ?? null;
  }

  /**
   * Restores or creates the machine, reconciles it with what the backends own (which re-arms the
   * restored agents' deadlines at their absolute times), then starts watching sessions.
   */
  async start(): Promise<void> {
    const stored = await this.options.store.load();
    const input = { caps: this.options.caps, backends: this.options.backends.map(planOf), timeouts: { ...TIMEOUTS, spawnMs: this.options.spawnTimeoutMs } };
    const usable = stored !== null && stored.machineVersion === SCALER_MACHINE_VERSION;
    if (stored && !usable) this.options.log.error({ version: stored.machineVersion }, 'scaler snapshot of another machine version; its agents are treated as orphans');
    const clock = this.options.clock;
    this.actor = createActor(this.machine(), usable ? { snapshot: stored.snapshot as never, input, clock } : { input, clock });
    this.actor.subscribe({ next: () => this.observe(), error: (err) => this.options.log.error({ err: coerceError(err) }, 'scaler machine failed') });
    this.actor.start();
    const alive = (await Promise.all(this.options.backends.map((backend) => this.aliveOn(backend)))).flat();
    this.send({ type: 'scaler.reload', caps: input.caps, backends: input.backends, at: clock.now() });
    this.supplyIds();
    this.send({ type: 'scaler.reconcile', alive, at: clock.now() });
    await this.chain;
    await this.reap();
    this.schedule();
  }

  /** Agent ids the backend still runs; when it cannot tell, its records are kept as they are. */
  private async aliveOn(backend: ScalerBackend): Promise<string[]> {
    try {
      return (await backend.listOwned()).map((resource) => resource.agentId);
    } catch (thrown) {
      this.options.log.warn({ backend: backend.name, err: coerceError(thrown) }, 'cannot list scaler resources; keeping its records');
      return Object.values(this.context?.agents ?? {}).filter((agent) => agent.backend === backend.name).map((agent) => agent.agentId);
    }
  }

  /** The URL spawned agents connect to; spawns wait for it (it is known once the server listens). */
  setOrchestratorUrl(url: string): void {
    this.resolveUrl(url);
  }

  send(event: ScalerEvent): void {
    if (!this.actor || this.fenced) return;
    this.actor.send(event);
  }

  /** Every change of the machine, whether an event or an agent's own deadline caused it, is stored before its intents run. */
  private observe(): void {
    this.changed += 1;
    this.updateGauges();
    void this.commit();
    queueMicrotask(() => this.supplyIds());
  }

  /** Keeps the machine supplied with fresh agent-id suffixes for the warm-pool spawns it decides alone. */
  private supplyIds(): void {
    const context = this.context;
    if (!context) return;
    const missing = spareIdsWanted(context) - context.spareIds.length;
    if (missing > 0) this.send({ type: 'scaler.ids', suffixes: Array.from({ length: missing }, suffix) });
  }

  private commit(): Promise<void> {
    const next = this.chain.then(() => this.flush());
    this.chain = next.catch((thrown: unknown) => this.options.log.error({ err: coerceError(thrown) }, 'scaler state not stored; retrying on the next change or check'));
    return this.chain;
  }

  /** Stores the snapshot, then runs the intents it covers (docs/architecture.md#time-durable-deadlines: nothing leaves before it is durable). */
  private async flush(): Promise<void> {
    if (!this.actor || this.fenced || (this.changed === this.saved && this.intents.length === 0)) return;
    const intents = this.intents.splice(0);
    const version = this.changed;
    const ok = await this.options.store.save(this.actor.getPersistedSnapshot()).catch((thrown: unknown) => {
      this.intents.unshift(...intents);
      throw thrown;
    });
    if (!ok) {
      this.fenced = true;
      this.actor.stop();
      this.options.log.error('scaler state write refused: this coordinator is fenced; no more spawns or destroys');
      return;
    }
    this.saved = version;
    for (const intent of intents) this.effects.run(intent);
  }

  // ---- the dispatcher's port (actors/dispatcher.ts) ----

  requestAgent(request: PlacementRequest): WaitingReason | null {
    const context = this.context;
    if (!context || this.fenced || !this.options.jobs.isWaitingForAgent(request.runId, request.jobKey)) return null;
    const candidates = candidatesFor(request.requirements, this.options.backends);
    if (candidates.length === 0) return this.outcome(request, 'no_backend', noBackendReason(request, this.options.backends));
    this.send({ type: 'scaler.request', runId: request.runId, jobKey: request.jobKey, candidates, suffix: suffix(), at: this.options.clock.now() });
    const bound = this.context ? boundAgentOf(this.context, request.runId, request.jobKey) : undefined;
    if (bound) return this.outcome(request, null, { kind: 'scaler_spawning', message: `spawning on ${bound.backend} (agent ${bound.agentId})` });
    return this.outcome(request, 'capacity', { kind: 'capacity', message: 'scaler at capacity' });
  }

  private outcome(request: PlacementRequest, refusal: string | null, reason: WaitingReason): WaitingReason {
    const key = jobKeyOf(request.runId, request.jobKey);
    if (refusal && this.lastOutcome.get(key) !== reason.message) this.options.metrics.refusals.inc({ reason: refusal });
    this.lastOutcome.set(key, reason.message);
    if (this.lastOutcome.size > 10_000) this.lastOutcome.delete(this.lastOutcome.keys().next().value as string);
    return reason;
  }

  /** An agent kept for another waiting job, or one that already served its single job, is not offered (SCL-3, SCL-7). */
  unavailableFor(agentId: string, runId: string, jobKey: string): boolean {
    const agent = this.context?.agents[agentId];
    if (!agent) return false;
    if (agent.state === 'busy' || agent.state === 'destroying') return true;
    // A spawn serves the job it was made for. Once that job went elsewhere the agent only idles out,
    // and a stock agent exits by itself after 5 s idle: another job given to it would race its end.
    const bound = agent.bound;
    return bound !== null && !(bound.runId === runId && bound.jobKey === jobKey);
  }

  /**
   * A spawned agent whose bound job still waits for an agent: its `register.ack` says `pendingDispatch`,
   * so a stock agent waits 60 s for that job instead of exiting after 5 s idle (SCL-3, SCL-7).
   */
  hasBoundJobWaiting(agentId: string): boolean {
    const bound = this.context?.agents[agentId]?.bound;
    return bound != null && this.options.jobs.isWaitingForAgent(bound.runId, bound.jobKey);
  }

  onGranted(agentId: string, runId: string, jobKey: string): void {
    if (this.context?.agents[agentId]) this.send({ type: 'scaler.agent.assigned', agentId, runId, jobKey, at: this.options.clock.now() });
  }

  // ---- what happens to agents ----

  /** Registration, the end of a single-use agent's job, and disconnects, read off the registry. */
  private syncSessions(): void {
    const context = this.context;
    if (!context) return;
    const now = this.options.clock.now();
    for (const agent of Object.values(context.agents)) {
      const session = this.options.registry.get(agent.agentId);
      if (session) this.missingSince.delete(agent.agentId);
      const event = this.sessionEvent(agent, session, now);
      if (event) this.send(event);
    }
  }

  private sessionEvent(agent: ScalerAgent, session: AgentSession | undefined, at: number): ScalerEvent | null {
    const { agentId } = agent;
    if (agent.state === 'spawning') return session ? { type: 'scaler.agent.registered', agentId, at } : null;
    if (agent.state === 'destroying') return null;
    // A session still reclaiming its job has no slot yet: it is not done with the job.
    if (session) return agent.state === 'busy' && session.slots.size === 0 && session.unusable !== 'reclaiming' ? { type: 'scaler.agent.finished', agentId, at } : null;
    const since = this.missingSince.get(agentId) ?? at;
    this.missingSince.set(agentId, since);
    const grace = agent.state === 'busy' ? (this.options.busyDisconnectGraceMs ?? 120_000) : (this.options.disconnectGraceMs ?? 10_000);
    if (at - since < grace) return null;
    this.missingSince.delete(agentId);
    return { type: 'scaler.agent.lost', agentId, reason: 'agent disconnected', at };
  }

  /** Session checks and orphan reaping are reconciliation with the outside, not deadlines: they poll. */
  private schedule(): void {
    this.timer = this.options.clock.setTimeout(() => void this.check(), this.options.tickMs);
  }

  private async check(): Promise<void> {
    try {
      this.syncSessions();
      await this.commit();
      if (this.options.clock.now() - this.lastReap >= (this.options.reapEveryMs ?? 15 * 60_000)) await this.reap();
    } catch (thrown) {
      this.options.log.warn({ err: coerceError(thrown) }, 'scaler check failed');
    } finally {
      if (this.timer !== null) this.schedule();
    }
  }

  private async reap(): Promise<void> {
    this.lastReap = this.options.clock.now();
    const deps = { backends: this.backends, store: this.options.store, log: this.options.log, now: () => this.options.clock.now() };
    await releaseAbandoned(deps);
    await reapOrphans(deps, () => Object.keys(this.context?.agents ?? {}));
  }

  /**
   * Coordinator shutdown: every agent is destroyed (SCL-1 `shutdownAll`), then the state stored;
   * agents in `keep` still run a job and are left alive to reclaim it after the restart.
   */
  async stop(options: { keep?: readonly string[] } = {}): Promise<void> {
    if (this.timer !== null) this.options.clock.clearTimeout(this.timer);
    this.timer = null;
    if (!this.actor) return;
    const keep = [...(options.keep ?? [])];
    this.send({ type: 'scaler.shutdown', keep, at: this.options.clock.now() });
    await this.chain;
    await this.effects.idle();
    if (keep.length === 0) await Promise.all(this.options.backends.map((backend) => backend.shutdownAll()));
    else this.options.log.info({ agents: keep }, 'scaler agents still running jobs are left running for the restart');
    await this.commit();
    this.actor.stop();
  }

  /** Scaler agents connected here, by id: the candidates to keep through a restart. */
  ownAgentIds(): string[] {
    return Object.keys(this.context?.agents ?? {});
  }

  private updateGauges(): void {
    const agents = Object.values(this.context?.agents ?? {});
    const { metrics } = this.options;
    for (const backend of this.options.backends) {
      const mine = agents.filter((a) => a.backend === backend.name);
      for (const state of STATES) metrics.agents.set({ backend: backend.name, state }, mine.filter((a) => a.state === state).length);
      metrics.cpusReserved.set({ backend: backend.name }, mine.reduce((sum, a) => sum + a.resources.cpu, 0));
      metrics.memoryReserved.set({ backend: backend.name }, mine.reduce((sum, a) => sum + a.resources.memoryBytes, 0));
    }
  }

  /** Each backend's status with its recent failures (`GET /api/v1/scalers`, `diagnose`). */
  status() {
    const context = this.context;
    const agents = Object.values(context?.agents ?? {});
    const failures = this.options.tracker.recentByBackend(DIAGNOSE_WINDOW_MS, this.options.clock.now());
    return {
      enabled: this.options.backends.length > 0,
      state: this.fenced ? 'fenced' : String(this.actor?.getSnapshot().value ?? 'stopped'),
      caps: context?.caps ?? this.options.caps,
      backends: this.options.backends.map((backend) => ({
        name: backend.name,
        type: backend.type,
        maxAgents: backend.maxAgents,
        spawnsOnLocalHost: backend.spawnsOnLocalHost,
        labelSets: backend.labelSets,
        agents: Object.fromEntries(STATES.map((state) => [state, agents.filter((a) => a.backend === backend.name && a.state === state).length])),
        recentFailures: failures[backend.name] ?? null,
      })),
      agents,
    };
  }
}

/**
 * Why neither a connected agent nor a backend serves the job: its labels, and for a job with steps
 * the kind of agent that executes them, naming the backends whose labels fit but whose agent cannot.
 */
function noBackendReason(request: PlacementRequest, backends: readonly ScalerBackend[]): WaitingReason {
  const { requirements } = request;
  const matchers = requirements.runsOn.map(describeMatcher);
  const labels = matchers.length > 0 ? matchers.join(', ') : '(any)';
  const near = requirements.executor === 'any' ? [] : wrongExecutorBackends(requirements, backends);
  const spawned = requirements.executor === 'kici' ? 'the reference agent, which executes only run steps' : 'KiCI agents, which do not execute run steps';
  const hint = near.length > 0 ? ` (${near.join(', ')} ${near.length > 1 ? 'spawn' : 'spawns'} ${spawned})` : '';
  switch (requirements.executor) {
    case 'any':
      return { kind: 'no_matching_agent', message: `no connected agent and no backend for labels ${labels}` };
    case 'kici':
      return { kind: 'no_matching_agent', message: `needs a KiCI agent (TypeScript steps); none connected and no scaler backend spawns one for labels ${labels}${hint}` };
    case 'run-steps':
      return { kind: 'no_matching_agent', message: `needs an agent that can execute run steps; none connected and no scaler backend spawns one for labels ${labels}${hint}` };
  }
}
