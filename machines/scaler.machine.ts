import { enqueueActions, setup } from 'xstate';
import type { EventFrom, SnapshotFrom } from 'xstate';
import { scalerAgentMachine } from './scaler-agent.machine.ts';
import type {
  AgentCommand,
  AgentReport,
  Binding,
  Resources,
  ScalerAgent,
  ScalerAgentNotice,
  ScalerIntent,
  ScalerTimeouts,
  SpawnIntent,
  Timed,
} from './scaler.types.ts';

export type {
  Binding,
  DestroyIntent,
  Resources,
  ScalerAgent,
  ScalerAgentState,
  ScalerIntent,
  ScalerTimeouts,
  SpawnFailureIntent,
  SpawnIntent,
} from './scaler.types.ts';

export const SCALER_MACHINE_ID = 'scaler';
/** Bump when a change (here or in the scaler-agent chart) makes stored scaler snapshots unreadable. */
export const SCALER_MACHINE_VERSION = 2;

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

/** A backend label set that serves a job (SCL-2); the host computes these from the labels. */
export interface Candidate {
  backend: string;
  labelSet: number;
}

export interface ScalerContext {
  caps: ScalerCaps;
  backends: Record<string, BackendPlan>;
  timeouts: ScalerTimeouts;
  /** One record per child agent, as the child last reported it: the reservations caps are checked over. */
  agents: Record<string, ScalerAgent>;
  /** Fresh agent-id suffixes from the host, for warm-pool spawns no host event asks for. */
  spareIds: string[];
}

export interface ScalerInput {
  caps: ScalerCaps;
  backends: BackendPlan[];
  timeouts: ScalerTimeouts;
}

export type ScalerEvent =
  | ({ type: 'scaler.request'; runId: string; jobKey: string; candidates: Candidate[]; suffix: string } & Timed)
  | AgentReport
  | ScalerAgentNotice
  | { type: 'scaler.ids'; suffixes: string[] }
  | ({ type: 'scaler.reconcile'; alive: string[] } & Timed)
  | ({ type: 'scaler.reload'; caps: ScalerCaps; backends: BackendPlan[] } & Timed)
  /** `keep`: agents still running a job, left alive to reclaim it after the restart. */
  | ({ type: 'scaler.shutdown'; keep?: string[] } & Timed);

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

/** What one transition decides: the new records, and what to do with the children. */
interface Step {
  agents: Agents;
  spareIds: string[];
  spawn: ScalerAgent[];
  tell: (AgentCommand | AgentReport)[];
  stop: string[];
  /** Reservations that ended with their resource: capacity the waiting jobs should hear about. */
  freed: string[];
}

function stepFrom(context: ScalerContext): Step {
  return { agents: { ...context.agents }, spareIds: [...context.spareIds], spawn: [], tell: [], stop: [], freed: [] };
}

/** Reserves an agent (SCL-5) in `step` when it fits; the child and the spawn intent follow from it. */
function reserve(context: ScalerContext, step: Step, candidate: Candidate, suffix: string, at: number, bound: Binding | null): ScalerAgent | null {
  const backend = context.backends[candidate.backend];
  const set = backend?.labelSets[candidate.labelSet];
  if (!backend || !set || !fits(context, backend.name, set.resources, step.agents)) return null;
  const agent: ScalerAgent = {
    ...{ agentId: agentIdFor(backend.type, suffix), backend: backend.name, labelSet: candidate.labelSet, resources: set.resources, state: 'spawning' },
    ...{ bound, warm: bound === null, reservedAt: at, spawnDeadlineAt: at + context.timeouts.spawnMs, backendRef: null, registeredAt: null },
    ...{ usedBy: null, idleDeadlineAt: null, endReason: null },
  };
  step.agents[agent.agentId] = agent;
  step.spawn.push(agent);
  return agent;
}

function onRequest(context: ScalerContext, event: Extract<ScalerEvent, { type: 'scaler.request' }>): Step {
  const step = stepFrom(context);
  const { runId, jobKey, at } = event;
  if (boundAgentOf(context, runId, jobKey)) return step;
  const servesJob = (agent: ScalerAgent) => event.candidates.some((c) => c.backend === agent.backend && c.labelSet === agent.labelSet);
  const warmSpawning = live(step.agents).find((agent) => agent.state === 'spawning' && agent.bound === null && servesJob(agent));
  if (warmSpawning) {
    step.agents[warmSpawning.agentId] = { ...warmSpawning, bound: { runId, jobKey } };
    step.tell.push({ type: 'scaler.agent.bind', agentId: warmSpawning.agentId, runId, jobKey, at });
    return step;
  }
  for (const candidate of event.candidates) if (reserve(context, step, candidate, event.suffix, at, { runId, jobKey })) break;
  return step;
}

function warmCount(agents: Agents, backend: string, labelSet: number): number {
  return live(agents).filter((a) => a.backend === backend && a.labelSet === labelSet && a.warm && a.usedBy === null && a.state !== 'destroying')
    .length;
}

/** SCL-8: spawns until every warm pool is full again, as far as the caps and the spare ids allow. */
function topUp(context: ScalerContext, step: Step, at: number): Step {
  for (const backend of Object.values(context.backends)) {
    backend.labelSets.forEach((set, labelSet) => {
      if (!set.warm) return;
      while (warmCount(step.agents, backend.name, labelSet) < set.warm.size && step.spareIds.length > 0) {
        if (!reserve(context, step, { backend: backend.name, labelSet }, step.spareIds[0] as string, at, null)) break;
        step.spareIds.shift();
      }
    });
  }
  return step;
}

/** How many spare ids the pools can use at once: the host keeps the machine supplied with that many. */
export function spareIdsWanted(context: ScalerContext): number {
  return Object.values(context.backends).reduce((total, backend) => total + backend.labelSets.reduce((n, set) => n + (set.warm?.size ?? 0), 0), 0);
}

/** A child's report replaces its record; a host event behind it may have shrunk a pool. */
function onChanged(context: ScalerContext, event: Extract<ScalerEvent, { type: 'scaler.agent.changed' }>, active: boolean): Step {
  const step = stepFrom(context);
  if (!step.agents[event.agent.agentId]) return step;
  step.agents[event.agent.agentId] = event.agent;
  return active && event.at !== null ? topUp(context, step, event.at) : step;
}

/**
 * The child is done: its reservation is freed. A destroyed agent's capacity is offered and a warm
 * one replaced; a failed spawn is retried by its job's backoff (or the next change), not at once.
 */
function onEnded(context: ScalerContext, event: Extract<ScalerEvent, { type: 'scaler.agent.ended' }>, active: boolean): Step {
  const step = stepFrom(context);
  delete step.agents[event.agentId];
  step.stop.push(event.agentId);
  if (event.outcome !== 'destroyed') return step;
  step.freed.push(event.agentId);
  return active && event.at !== null ? topUp(context, step, event.at) : step;
}

/** After a restart: agents whose resource is gone are released; the others re-arm their deadlines. */
function onReconcile(context: ScalerContext, event: Extract<ScalerEvent, { type: 'scaler.reconcile' }>): Step {
  const step = stepFrom(context);
  const alive = new Set(event.alive);
  for (const agent of live(step.agents)) {
    if (alive.has(agent.agentId)) {
      step.tell.push({ type: 'scaler.agent.resume', agentId: agent.agentId, at: event.at });
    } else {
      delete step.agents[agent.agentId];
      step.stop.push(agent.agentId);
      step.freed.push(agent.agentId);
    }
  }
  return step;
}

function retireAll(context: ScalerContext, reason: string, at: number, which: (agent: ScalerAgent) => boolean): Step {
  const step = stepFrom(context);
  for (const agent of live(step.agents)) {
    if (agent.state !== 'destroying' && which(agent)) step.tell.push({ type: 'scaler.agent.retire', agentId: agent.agentId, reason, at });
  }
  return step;
}

/** A host report about an agent goes to that agent's child; one about an unknown agent changes nothing. */
function forward(context: ScalerContext, event: ScalerEvent): Step {
  const step = stepFrom(context);
  if ('agentId' in event && 'at' in event && step.agents[event.agentId] && event.type !== 'scaler.agent.ended') step.tell.push(event);
  return step;
}

function byName(backends: BackendPlan[]): Record<string, BackendPlan> {
  return Object.fromEntries(backends.map((backend) => [backend.name, backend]));
}

type StepFn = (context: ScalerContext, event: ScalerEvent) => Step;

type SpawnAction = Extract<ScalerIntent, { type: 'spawnAgent' | 'offerCapacity' }>;
type ChildAgent = { src: 'scalerAgent'; logic: typeof scalerAgentMachine; id: string | undefined };

function spawnIntent(agent: ScalerAgent): Extract<ScalerIntent, { type: 'spawnAgent' }> {
  const { agentId, backend, labelSet, resources, bound } = agent;
  return { type: 'spawnAgent', params: { agentId, backend, labelSet, resources, bound } };
}

/** Applies a pure step: records to context, a child per new reservation, commands to children, spawn intents to the host. */
function apply(step: StepFn) {
  return enqueueActions<ScalerContext, ScalerEvent, undefined, ScalerEvent, ChildAgent, SpawnAction, never>(
    ({ context, event, enqueue }) => {
      const { agents, spareIds, spawn, tell, stop, freed } = step(context, event);
      enqueue.assign({ agents, spareIds });
      for (const agentId of stop) enqueue.stopChild(agentId);
      for (const agent of spawn) {
        const { state: _state, ...record } = agent;
        enqueue.spawnChild('scalerAgent', { id: agent.agentId, input: { agent: record, timeouts: context.timeouts } });
        enqueue(spawnIntent(agent));
      }
      for (const command of tell) enqueue.sendTo(command.agentId, command);
      if (freed.length > 0) enqueue({ type: 'offerCapacity', params: { freedBy: freed.join(', ') } });
    },
  );
}

function only<T extends ScalerEvent['type']>(type: T, fn: (context: ScalerContext, event: Extract<ScalerEvent, { type: T }>) => Step): StepFn {
  return (context, event) => (event.type === type ? fn(context, event as Extract<ScalerEvent, { type: T }>) : stepFrom(context));
}

/**
 * The scaler manager (docs/architecture.md#the-scaler): every backend's reservations in one mailbox, so the
 * global and per-backend caps are checked and reserved in one transition (SCL-5). Each agent's
 * lifecycle and deadlines are its own `scalerAgent` child; backend I/O happens outside, as intents.
 */
export const scalerMachine = setup({
  types: {
    context: {} as ScalerContext,
    events: {} as ScalerEvent,
    input: {} as ScalerInput,
  },
  actors: { scalerAgent: scalerAgentMachine },
  actions: {
    // Host-provided intents. The defaults do nothing: machines perform no I/O.
    spawnAgent: (_, _params: SpawnIntent) => {},
    offerCapacity: (_, _params: { freedBy: string }) => {},
    request: apply(only('scaler.request', onRequest)),
    forward: apply(forward),
    changed: apply(only('scaler.agent.changed', (context, event) => onChanged(context, event, false))),
    changedTopUp: apply(only('scaler.agent.changed', (context, event) => onChanged(context, event, true))),
    ended: apply(only('scaler.agent.ended', (context, event) => onEnded(context, event, false))),
    endedTopUp: apply(only('scaler.agent.ended', (context, event) => onEnded(context, event, true))),
    keepIds: enqueueActions<ScalerContext, ScalerEvent, undefined, ScalerEvent, never, SpawnAction, never>(({ context, event, enqueue }) => {
      if (event.type === 'scaler.ids') enqueue.assign({ spareIds: [...context.spareIds, ...event.suffixes].slice(0, Math.max(spareIdsWanted(context), 0)) });
    }),
    reconcile: apply(only('scaler.reconcile', onReconcile)),
    topUp: apply((context, event) => topUp(context, stepFrom(context), 'at' in event && typeof event.at === 'number' ? event.at : 0)),
    reload: apply(only('scaler.reload', (context, event) => {
      const names = new Set(event.backends.map((backend) => backend.name));
      return retireAll(context, 'backend removed by reload', event.at, (agent) => !names.has(agent.backend));
    })),
    applyPlans: enqueueActions<ScalerContext, ScalerEvent, undefined, ScalerEvent, never, SpawnAction, never>(({ event, enqueue }) => {
      if (event.type === 'scaler.reload') enqueue.assign({ caps: event.caps, backends: byName(event.backends) });
    }),
    retireEverything: apply(only('scaler.shutdown', (context, event) => {
      const keep = new Set(event.keep ?? []);
      return retireAll(context, 'coordinator shutting down', event.at, (agent) => !keep.has(agent.agentId));
    })),
  },
}).createMachine({
  id: SCALER_MACHINE_ID,
  context: ({ input }) => ({ caps: input.caps, backends: byName(input.backends), timeouts: input.timeouts, agents: {}, spareIds: [] }),
  initial: 'active',
  on: {
    'scaler.agent.spawned': { actions: 'forward' },
    'scaler.agent.spawn_failed': { actions: 'forward' },
    'scaler.agent.registered': { actions: 'forward' },
    'scaler.agent.assigned': { actions: 'forward' },
    'scaler.agent.finished': { actions: 'forward' },
    'scaler.agent.lost': { actions: 'forward' },
    'scaler.agent.destroyed': { actions: 'forward' },
    'scaler.agent.changed': { actions: 'changed' },
    'scaler.agent.ended': { actions: 'ended' },
    'scaler.ids': { actions: 'keepIds' },
    'scaler.reconcile': { actions: 'reconcile' },
  },
  states: {
    active: {
      description: 'Spawns for jobs and keeps warm pools full; refuses what the caps do not allow.',
      on: {
        'scaler.request': { actions: 'request' },
        'scaler.agent.changed': { actions: 'changedTopUp' },
        'scaler.agent.ended': { actions: 'endedTopUp' },
        'scaler.reconcile': { actions: ['reconcile', 'topUp'] },
        'scaler.reload': { actions: ['reload', 'applyPlans', 'topUp'] },
        'scaler.shutdown': { target: 'draining', actions: 'retireEverything' },
      },
    },
    draining: {
      description: 'The coordinator is stopping: idle agents are destroyed and nothing new is spawned.',
      on: {
        // A stored draining scaler is active again when the coordinator starts.
        'scaler.reload': { target: 'active', actions: ['reload', 'applyPlans', 'topUp'] },
      },
    },
  },
});

/** The scaler with every intent, its own and its agents', handed to `record`; the host runs them once stored. */
export function scalerMachineRecording(record: (intent: ScalerIntent) => void) {
  return scalerMachine.provide({
    actions: {
      spawnAgent: (_, params) => record({ type: 'spawnAgent', params }),
      offerCapacity: (_, params) => record({ type: 'offerCapacity', params }),
    },
    actors: {
      scalerAgent: scalerAgentMachine.provide({
        actions: {
          destroyAgent: (_, params) => record({ type: 'destroyAgent', params }),
          reportSpawnFailure: (_, params) => record({ type: 'reportSpawnFailure', params }),
        },
      }),
    },
  });
}

export type ScalerMachine = typeof scalerMachine;
export type ScalerSnapshot = SnapshotFrom<ScalerMachine>;
export type ScalerMachineEvent = EventFrom<ScalerMachine>;
