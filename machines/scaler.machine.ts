import { enqueueActions, setup } from 'xstate';
import type { EventFrom, SnapshotFrom } from 'xstate';

export const SCALER_MACHINE_ID = 'scaler';
/** Bump when a change makes stored scaler snapshots unreadable. */
export const SCALER_MACHINE_VERSION = 1;

export interface Resources {
  cpu: number;
  memoryBytes: number;
}

/** Global caps over every backend of this coordinator (SCL-5); null is unlimited. */
export interface ScalerCaps {
  maxAgents: number;
  maxCpu: number | null;
  maxMemoryBytes: number | null;
}

/** What the machine needs to know of a backend: its caps and, per label set, reservations and pool. */
export interface BackendPlan {
  name: string;
  type: string;
  maxAgents: number;
  maxCpu: number | null;
  maxMemoryBytes: number | null;
  labelSets: { resources: Resources; warm: { size: number; idleTimeoutMs: number } | null }[];
}

export interface Binding {
  runId: string;
  jobKey: string;
}

/** A backend label set that serves a job (SCL-2); the host computes these from the labels. */
export interface Candidate {
  backend: string;
  labelSet: number;
}

/** `spawning` → `idle` (registered) → `busy` (took a job) → `destroying`; the record goes when destroyed. */
export type ScalerAgentState = 'spawning' | 'idle' | 'busy' | 'destroying';

/** One agent and its reservation. The reservation lives exactly as long as the record. */
export interface ScalerAgent {
  agentId: string;
  backend: string;
  labelSet: number;
  resources: Resources;
  state: ScalerAgentState;
  /** The job this spawn is for (SCL-3); a warm-pool spawn has none. */
  bound: Binding | null;
  warm: boolean;
  reservedAt: number;
  /** A spawn that has not registered by then is released (SCL-6). */
  spawnDeadlineAt: number;
  backendRef: string | null;
  registeredAt: number | null;
  /** The one job this single-use agent took (SCL-7). */
  usedBy: Binding | null;
  idleDeadlineAt: number | null;
  endReason: string | null;
}

export interface ScalerTimeouts {
  spawnMs: number;
  /** How long a registered bound agent waits for its job (the stock agent's pendingDispatch idle: 60 s). */
  boundIdleMs: number;
  /** How long a registered unbound agent outside the warm pool idles (5 s). */
  unboundIdleMs: number;
}

export interface ScalerContext {
  caps: ScalerCaps;
  backends: Record<string, BackendPlan>;
  timeouts: ScalerTimeouts;
  agents: Record<string, ScalerAgent>;
}

export interface ScalerInput {
  caps: ScalerCaps;
  backends: BackendPlan[];
  timeouts: ScalerTimeouts;
}

interface Timed {
  at: number;
}
interface AboutAgent extends Timed {
  agentId: string;
}

export type ScalerEvent =
  | ({ type: 'scaler.request'; runId: string; jobKey: string; candidates: Candidate[]; suffix: string } & Timed)
  | ({ type: 'scaler.tick'; suffixes: string[] } & Timed)
  | ({ type: 'scaler.agent.spawned'; backendRef: string } & AboutAgent)
  | ({ type: 'scaler.agent.spawn_failed'; message: string } & AboutAgent)
  | ({ type: 'scaler.agent.registered' } & AboutAgent)
  | ({ type: 'scaler.agent.assigned'; runId: string; jobKey: string } & AboutAgent)
  | ({ type: 'scaler.agent.finished' } & AboutAgent)
  | ({ type: 'scaler.agent.lost'; reason: string } & AboutAgent)
  | ({ type: 'scaler.agent.destroyed' } & AboutAgent)
  | ({ type: 'scaler.reconcile'; alive: string[] } & Timed)
  | ({ type: 'scaler.reload'; caps: ScalerCaps; backends: BackendPlan[] } & Timed)
  /** `keep`: agents still running a job, left alive to reclaim it after the restart. */
  | ({ type: 'scaler.shutdown'; keep?: string[] } & Timed);

export interface SpawnIntent {
  agentId: string;
  backend: string;
  labelSet: number;
  resources: Resources;
  bound: Binding | null;
}

/** Intents the host performs after the snapshot that caused them is stored (DESIGN.md §4). */
export type ScalerIntent =
  | { type: 'spawnAgent'; params: SpawnIntent }
  | { type: 'destroyAgent'; params: { agentId: string; backend: string; reason: string } }
  | { type: 'reportSpawnFailure'; params: { agentId: string; backend: string; bound: Binding | null; message: string } };

type Agents = Record<string, ScalerAgent>;

function live(agents: Agents): ScalerAgent[] {
  return Object.values(agents);
}

function within(limit: number | null, used: number, extra: number): boolean {
  return limit === null || used + extra <= limit;
}

function sum(agents: ScalerAgent[], pick: (r: Resources) => number): number {
  return agents.reduce((total, agent) => total + pick(agent.resources), 0);
}

/**
 * SCL-5: a new agent fits when the global and the backend's agent counts and resource sums stay
 * within their caps. Every record counts, destroying ones too: their reservation ends when they are gone.
 */
export function fits(context: ScalerContext, backendName: string, resources: Resources, agents: Agents = context.agents): boolean {
  const backend = context.backends[backendName];
  if (!backend) return false;
  const all = live(agents);
  const mine = all.filter((agent) => agent.backend === backendName);
  return (
    all.length < context.caps.maxAgents &&
    mine.length < backend.maxAgents &&
    within(backend.maxCpu, sum(mine, (r) => r.cpu), resources.cpu) &&
    within(backend.maxMemoryBytes, sum(mine, (r) => r.memoryBytes), resources.memoryBytes) &&
    within(context.caps.maxCpu, sum(all, (r) => r.cpu), resources.cpu) &&
    within(context.caps.maxMemoryBytes, sum(all, (r) => r.memoryBytes), resources.memoryBytes)
  );
}

export function agentIdFor(type: string, suffix: string): string {
  return `scaler-${type}-${suffix}`;
}

function sameJob(a: Binding | null, runId: string, jobKey: string): boolean {
  return a !== null && a.runId === runId && a.jobKey === jobKey;
}

/** The agent already provisioned for this job, if any: requests are idempotent per job. */
export function boundAgentOf(context: ScalerContext, runId: string, jobKey: string): ScalerAgent | undefined {
  return live(context.agents).find((agent) => sameJob(agent.bound, runId, jobKey) && (agent.state === 'spawning' || agent.state === 'idle'));
}

function reserve(context: ScalerContext, candidate: Candidate, suffix: string, at: number, bound: Binding | null): ScalerAgent | null {
  const backend = context.backends[candidate.backend];
  const set = backend?.labelSets[candidate.labelSet];
  if (!backend || !set || !fits(context, backend.name, set.resources)) return null;
  return {
    agentId: agentIdFor(backend.type, suffix),
    backend: backend.name,
    labelSet: candidate.labelSet,
    resources: set.resources,
    state: 'spawning',
    bound,
    warm: bound === null,
    reservedAt: at,
    spawnDeadlineAt: at + context.timeouts.spawnMs,
    backendRef: null,
    registeredAt: null,
    usedBy: null,
    idleDeadlineAt: null,
    endReason: null,
  };
}

function spawnIntent(agent: ScalerAgent): ScalerIntent {
  const { agentId, backend, labelSet, resources, bound } = agent;
  return { type: 'spawnAgent', params: { agentId, backend, labelSet, resources, bound } };
}

/** Marks an agent for destruction; the reservation is freed when `scaler.agent.destroyed` arrives. */
function retire(agents: Agents, agent: ScalerAgent, reason: string, intents: ScalerIntent[]): void {
  agents[agent.agentId] = { ...agent, state: 'destroying', endReason: reason, idleDeadlineAt: null };
  intents.push({ type: 'destroyAgent', params: { agentId: agent.agentId, backend: agent.backend, reason } });
}

function failSpawn(agent: ScalerAgent, message: string, intents: ScalerIntent[]): void {
  intents.push({ type: 'reportSpawnFailure', params: { agentId: agent.agentId, backend: agent.backend, bound: agent.bound, message } });
}

type Step = { agents: Agents; intents: ScalerIntent[] };

function onRequest(context: ScalerContext, event: Extract<ScalerEvent, { type: 'scaler.request' }>): Step {
  const agents = { ...context.agents };
  const intents: ScalerIntent[] = [];
  const { runId, jobKey } = event;
  if (boundAgentOf(context, runId, jobKey)) return { agents, intents };
  const servesJob = (agent: ScalerAgent) => event.candidates.some((c) => c.backend === agent.backend && c.labelSet === agent.labelSet);
  const warmSpawning = live(agents).find((agent) => agent.state === 'spawning' && agent.bound === null && servesJob(agent));
  if (warmSpawning) {
    agents[warmSpawning.agentId] = { ...warmSpawning, bound: { runId, jobKey } };
    return { agents, intents };
  }
  for (const candidate of event.candidates) {
    const agent = reserve(context, candidate, event.suffix, event.at, { runId, jobKey });
    if (!agent) continue;
    agents[agent.agentId] = agent;
    intents.push(spawnIntent(agent));
    break;
  }
  return { agents, intents };
}

function warmCount(agents: Agents, backend: string, labelSet: number): number {
  return live(agents).filter((a) => a.backend === backend && a.labelSet === labelSet && a.warm && a.usedBy === null && a.state !== 'destroying')
    .length;
}

function onTick(context: ScalerContext, event: Extract<ScalerEvent, { type: 'scaler.tick' }>): Step {
  const agents = { ...context.agents };
  const intents: ScalerIntent[] = [];
  for (const agent of live(agents)) {
    if (agent.state === 'spawning' && agent.spawnDeadlineAt <= event.at) {
      const seconds = Math.round(context.timeouts.spawnMs / 1000);
      const message = `agent ${agent.agentId} did not register within ${seconds} s`;
      retire(agents, agent, message, intents);
      failSpawn(agent, message, intents);
    } else if (agent.state === 'idle' && agent.idleDeadlineAt !== null && agent.idleDeadlineAt <= event.at) {
      retire(agents, agent, 'idle timeout', intents);
    }
  }
  const suffixes = [...event.suffixes];
  for (const backend of Object.values(context.backends)) {
    backend.labelSets.forEach((set, labelSet) => {
      if (!set.warm) return;
      while (warmCount(agents, backend.name, labelSet) < set.warm.size && suffixes.length > 0) {
        const agent = reserve({ ...context, agents }, { backend: backend.name, labelSet }, suffixes.shift() as string, event.at, null);
        if (!agent) break;
        agents[agent.agentId] = agent;
        intents.push(spawnIntent(agent));
      }
    });
  }
  return { agents, intents };
}

function idleDeadline(context: ScalerContext, agent: ScalerAgent, at: number): number | null {
  if (agent.bound) return at + context.timeouts.boundIdleMs;
  if (agent.warm) return null;
  return at + context.timeouts.unboundIdleMs;
}

/** One agent's own events; anything for an unknown or already destroying agent changes nothing. */
function onAgentEvent(context: ScalerContext, event: ScalerEvent): Step {
  const agents = { ...context.agents };
  const intents: ScalerIntent[] = [];
  const agent = 'agentId' in event ? agents[event.agentId] : undefined;
  if (!agent) return { agents, intents };
  switch (event.type) {
    case 'scaler.agent.spawned':
      if (agent.state !== 'destroying') agents[agent.agentId] = { ...agent, backendRef: event.backendRef };
      break;
    case 'scaler.agent.spawn_failed':
      delete agents[agent.agentId];
      if (agent.state !== 'destroying') failSpawn(agent, event.message, intents);
      break;
    case 'scaler.agent.registered':
      if (agent.state === 'spawning') agents[agent.agentId] = { ...agent, state: 'idle', registeredAt: event.at, idleDeadlineAt: idleDeadline(context, agent, event.at) };
      break;
    case 'scaler.agent.assigned':
      if (agent.state === 'spawning' || agent.state === 'idle') {
        agents[agent.agentId] = { ...agent, state: 'busy', usedBy: { runId: event.runId, jobKey: event.jobKey }, idleDeadlineAt: null };
      }
      break;
    case 'scaler.agent.finished':
      if (agent.state === 'busy') retire(agents, agent, 'job finished (single use)', intents);
      break;
    case 'scaler.agent.lost':
      if (agent.state === 'destroying') break;
      retire(agents, agent, event.reason, intents);
      if (agent.state === 'spawning') failSpawn(agent, `agent ${agent.agentId} ended before registering: ${event.reason}`, intents);
      break;
    case 'scaler.agent.destroyed':
      delete agents[agent.agentId];
      break;
  }
  return { agents, intents };
}

/** After a restart: agents whose resource is gone are released; destroys in flight are re-issued. */
function onReconcile(context: ScalerContext, event: Extract<ScalerEvent, { type: 'scaler.reconcile' }>): Step {
  const agents = { ...context.agents };
  const intents: ScalerIntent[] = [];
  const alive = new Set(event.alive);
  for (const agent of live(agents)) {
    if (!alive.has(agent.agentId)) delete agents[agent.agentId];
    else if (agent.state === 'destroying') retire(agents, agent, agent.endReason ?? 'destroy after restart', intents);
  }
  return { agents, intents };
}

function retireAll(context: ScalerContext, reason: string, which: (agent: ScalerAgent) => boolean): Step {
  const agents = { ...context.agents };
  const intents: ScalerIntent[] = [];
  for (const agent of live(agents)) if (agent.state !== 'destroying' && which(agent)) retire(agents, agent, reason, intents);
  return { agents, intents };
}

function byName(backends: BackendPlan[]): Record<string, BackendPlan> {
  return Object.fromEntries(backends.map((backend) => [backend.name, backend]));
}

type StepFn = (context: ScalerContext, event: ScalerEvent) => Step;

/** Applies a pure step: the new records go to context, the intents to the host. */
function apply(step: StepFn) {
  return enqueueActions<ScalerContext, ScalerEvent, undefined, ScalerEvent, never, ScalerIntent, never>(({ context, event, enqueue }) => {
    const { agents, intents } = step(context, event);
    enqueue.assign({ agents });
    for (const intent of intents) enqueue(intent);
  });
}

/**
 * The scaler manager (orchestration.md §15): every backend's agents and reservations in one
 * mailbox, so the global and per-backend caps are checked and reserved in one transition (SCL-5).
 * Backend I/O happens outside, as intents; results come back as `scaler.agent.*` events.
 */
export const scalerMachine = setup({
  types: {
    context: {} as ScalerContext,
    events: {} as ScalerEvent,
    input: {} as ScalerInput,
  },
  actions: {
    // Host-provided intents. The defaults do nothing: machines perform no I/O.
    spawnAgent: (_, _params: SpawnIntent) => {},
    destroyAgent: (_, _params: { agentId: string; backend: string; reason: string }) => {},
    reportSpawnFailure: (_, _params: { agentId: string; backend: string; bound: Binding | null; message: string }) => {},
    request: apply((context, event) => (event.type === 'scaler.request' ? onRequest(context, event) : { agents: context.agents, intents: [] })),
    tick: apply((context, event) => (event.type === 'scaler.tick' ? onTick(context, event) : { agents: context.agents, intents: [] })),
    agentEvent: apply(onAgentEvent),
    reconcile: apply((context, event) => (event.type === 'scaler.reconcile' ? onReconcile(context, event) : { agents: context.agents, intents: [] })),
    reload: apply((context, event) => {
      if (event.type !== 'scaler.reload') return { agents: context.agents, intents: [] };
      const names = new Set(event.backends.map((backend) => backend.name));
      return retireAll(context, 'backend removed by reload', (agent) => !names.has(agent.backend));
    }),
    applyPlans: enqueueActions<ScalerContext, ScalerEvent, undefined, ScalerEvent, never, ScalerIntent, never>(({ event, enqueue }) => {
      if (event.type === 'scaler.reload') enqueue.assign({ caps: event.caps, backends: byName(event.backends) });
    }),
    retireEverything: apply((context, event) => {
      const keep = new Set(event.type === 'scaler.shutdown' ? (event.keep ?? []) : []);
      return retireAll(context, 'coordinator shutting down', (agent) => !keep.has(agent.agentId));
    }),
  },
}).createMachine({
  id: SCALER_MACHINE_ID,
  context: ({ input }) => ({ caps: input.caps, backends: byName(input.backends), timeouts: input.timeouts, agents: {} }),
  initial: 'active',
  on: {
    'scaler.agent.spawned': { actions: 'agentEvent' },
    'scaler.agent.spawn_failed': { actions: 'agentEvent' },
    'scaler.agent.registered': { actions: 'agentEvent' },
    'scaler.agent.assigned': { actions: 'agentEvent' },
    'scaler.agent.finished': { actions: 'agentEvent' },
    'scaler.agent.lost': { actions: 'agentEvent' },
    'scaler.agent.destroyed': { actions: 'agentEvent' },
    'scaler.reconcile': { actions: 'reconcile' },
  },
  states: {
    active: {
      description: 'Spawns for jobs and keeps warm pools; refuses what the caps do not allow.',
      on: {
        'scaler.request': { actions: 'request' },
        'scaler.tick': { actions: 'tick' },
        'scaler.reload': { actions: ['reload', 'applyPlans'] },
        'scaler.shutdown': { target: 'draining', actions: 'retireEverything' },
      },
    },
    draining: {
      description: 'The coordinator is stopping: idle agents are destroyed and nothing new is spawned.',
      on: {
        // A stored draining scaler is active again when the coordinator starts.
        'scaler.reload': { target: 'active', actions: ['reload', 'applyPlans'] },
      },
    },
  },
});

export type ScalerMachine = typeof scalerMachine;
export type ScalerSnapshot = SnapshotFrom<ScalerMachine>;
export type ScalerMachineEvent = EventFrom<ScalerMachine>;
