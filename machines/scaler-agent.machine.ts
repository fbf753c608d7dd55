import { assign, assertEvent, enqueueActions, sendParent, setup } from 'xstate';
import type { SnapshotFrom } from 'xstate';
import type { DestroyIntent, ScalerAgent, ScalerAgentEvent, ScalerAgentNotice, ScalerAgentState, ScalerIntent, ScalerTimeouts, SpawnFailureIntent } from './scaler.types.ts';

export const SCALER_AGENT_MACHINE_ID = 'scalerAgent';
/** Its snapshots are stored inside the scaler's: a change here bumps SCALER_MACHINE_VERSION too. */
export const SCALER_AGENT_MACHINE_VERSION = 1;

export interface ScalerAgentContext extends Omit<ScalerAgent, 'state'> {
  timeouts: ScalerTimeouts;
}

export interface ScalerAgentInput {
  agent: Omit<ScalerAgent, 'state'>;
  timeouts: ScalerTimeouts;
}

/** Node clamps longer timers to 1 ms. */
const MAX_DELAY_MS = 2_147_483_647;

/**
 * The time of the event that entered the state: every event carries `at`; the first entry (on
 * `xstate.init`) happens when the agent was reserved. Deadlines are absolute, so a delay armed
 * again after a restore (`scaler.agent.resume`) ends at the same instant as the first one.
 */
function nowOf(event: unknown, context: ScalerAgentContext): number {
  return eventAt(event) ?? context.reservedAt;
}

function eventAt(event: unknown): number | null {
  return typeof event === 'object' && event !== null && 'at' in event && typeof event.at === 'number' ? event.at : null;
}

function until(deadline: number | null, now: number): number {
  return Math.min(MAX_DELAY_MS, Math.max(0, (deadline ?? now) - now));
}

function view(context: ScalerAgentContext, state: ScalerAgentState): ScalerAgent {
  const { timeouts: _timeouts, ...agent } = context;
  return { ...agent, state };
}

function spawnTimeoutMessage(context: ScalerAgentContext): string {
  return `agent ${context.agentId} did not register within ${Math.round(context.timeouts.spawnMs / 1000)} s`;
}

function failure(context: ScalerAgentContext, message: string): SpawnFailureIntent {
  return { agentId: context.agentId, backend: context.backend, bound: context.bound, message };
}

function idleDeadline(context: ScalerAgentContext, at: number): number | null {
  if (context.bound) return at + context.timeouts.boundIdleMs;
  if (context.warm) return null;
  return at + context.timeouts.unboundIdleMs;
}

type Report = { state: ScalerAgentState };
type Retirement = { reason: string; failure?: string };
type AgentIntent = Extract<ScalerIntent, { type: 'destroyAgent' | 'reportSpawnFailure' }>;

/** Every way to `destroying`: the reason is kept, the destroy asked for, then a spawn that never served reported. */
const retire = enqueueActions<ScalerAgentContext, ScalerAgentEvent, Retirement, ScalerAgentEvent, never, AgentIntent, never>(({ context, enqueue }, params) => {
  enqueue.assign({ endReason: params.reason, idleDeadlineAt: null });
  enqueue({ type: 'destroyAgent', params: { agentId: context.agentId, backend: context.backend, reason: params.reason } });
  if (params.failure !== undefined) enqueue({ type: 'reportSpawnFailure', params: failure(context, params.failure) });
});

/**
 * One scaler agent's lifecycle (docs/architecture.md#the-scaler, SCL-6/7/8), a child of the scaler machine.
 * Its spawn and idle deadlines are delayed transitions computed from the absolute deadlines in
 * context. Every change is reported to the scaler, which keeps the record for caps and placement.
 */
export const scalerAgentMachine = setup({
  types: {
    context: {} as ScalerAgentContext,
    events: {} as ScalerAgentEvent,
    input: {} as ScalerAgentInput,
  },
  actions: {
    // Host-provided intents. The defaults do nothing: machines perform no I/O.
    destroyAgent: (_, _params: DestroyIntent) => {},
    reportSpawnFailure: (_, _params: SpawnFailureIntent) => {},
    report: sendParent(({ context, event }, params: Report): ScalerAgentNotice => ({ type: 'scaler.agent.changed', agent: view(context, params.state), at: eventAt(event) })),
    end: sendParent(({ context, event }, params: { outcome: 'destroyed' | 'spawn_failed' }): ScalerAgentNotice => ({
      ...{ type: 'scaler.agent.ended', agentId: context.agentId, outcome: params.outcome },
      at: eventAt(event),
    })),
    noteSpawned: assign(({ event }) => {
      assertEvent(event, 'scaler.agent.spawned');
      return { backendRef: event.backendRef };
    }),
    noteRegistered: assign(({ context, event }) => {
      assertEvent(event, 'scaler.agent.registered');
      return { registeredAt: event.at, idleDeadlineAt: idleDeadline(context, event.at) };
    }),
    noteUse: assign(({ event }) => {
      assertEvent(event, 'scaler.agent.assigned');
      return { usedBy: { runId: event.runId, jobKey: event.jobKey }, idleDeadlineAt: null };
    }),
    bind: assign(({ event }) => {
      assertEvent(event, 'scaler.agent.bind');
      return { bound: { runId: event.runId, jobKey: event.jobKey } };
    }),
    retire,
  },
  guards: {
    unbound: ({ context }) => context.bound === null,
    /** A registered warm agent that no job claimed waits in its pool without a deadline (SCL-8). */
    pooled: ({ context }) => context.warm && context.bound === null,
  },
  delays: {
    spawnDeadline: ({ context, event }) => until(context.spawnDeadlineAt, nowOf(event, context)),
    idleDeadline: ({ context, event }) => until(context.idleDeadlineAt, nowOf(event, context)),
  },
}).createMachine({
  id: SCALER_AGENT_MACHINE_ID,
  context: ({ input }) => ({ ...input.agent, timeouts: input.timeouts }),
  initial: 'spawning',
  on: {
    'scaler.agent.spawn_failed': {
      target: '.spawnFailed',
      actions: { type: 'reportSpawnFailure', params: ({ context, event }) => failure(context, event.message) },
    },
  },
  states: {
    spawning: {
      description: 'Reserved and asked for; waits for the agent to register until the spawn deadline.',
      entry: { type: 'report', params: { state: 'spawning' } },
      after: {
        spawnDeadline: {
          target: 'destroying',
          actions: { type: 'retire', params: ({ context }) => ({ reason: spawnTimeoutMessage(context), failure: spawnTimeoutMessage(context) }) },
        },
      },
      on: {
        'scaler.agent.spawned': { actions: ['noteSpawned', { type: 'report', params: { state: 'spawning' } }] },
        'scaler.agent.registered': [
          { guard: 'pooled', target: 'pooled', actions: 'noteRegistered' },
          { target: 'idle', actions: 'noteRegistered' },
        ],
        'scaler.agent.assigned': { target: 'busy', actions: 'noteUse' },
        'scaler.agent.bind': { guard: 'unbound', actions: ['bind', { type: 'report', params: { state: 'spawning' } }] },
        'scaler.agent.lost': {
          target: 'destroying',
          actions: {
            type: 'retire',
            params: ({ context, event }) => ({ reason: event.reason, failure: `agent ${context.agentId} ended before registering: ${event.reason}` }),
          },
        },
        'scaler.agent.retire': { target: 'destroying', actions: { type: 'retire', params: ({ event }) => ({ reason: event.reason }) } },
        'scaler.agent.resume': { target: 'spawning', reenter: true },
      },
    },
    idle: {
      description: 'Registered; waits for a job until the idle deadline (60 s for its bound job, 5 s unbound).',
      entry: { type: 'report', params: { state: 'idle' } },
      after: { idleDeadline: { target: 'destroying', actions: { type: 'retire', params: { reason: 'idle timeout' } } } },
      on: {
        'scaler.agent.spawned': { actions: ['noteSpawned', { type: 'report', params: { state: 'idle' } }] },
        'scaler.agent.assigned': { target: 'busy', actions: 'noteUse' },
        'scaler.agent.lost': { target: 'destroying', actions: { type: 'retire', params: ({ event }) => ({ reason: event.reason }) } },
        'scaler.agent.retire': { target: 'destroying', actions: { type: 'retire', params: ({ event }) => ({ reason: event.reason }) } },
        'scaler.agent.resume': { target: 'idle', reenter: true },
      },
    },
    pooled: {
      description: 'A registered warm-pool agent no job claimed: waits for any job, without a deadline (SCL-8).',
      entry: { type: 'report', params: { state: 'idle' } },
      on: {
        'scaler.agent.spawned': { actions: ['noteSpawned', { type: 'report', params: { state: 'idle' } }] },
        'scaler.agent.assigned': { target: 'busy', actions: 'noteUse' },
        'scaler.agent.lost': { target: 'destroying', actions: { type: 'retire', params: ({ event }) => ({ reason: event.reason }) } },
        'scaler.agent.retire': { target: 'destroying', actions: { type: 'retire', params: ({ event }) => ({ reason: event.reason }) } },
      },
    },
    busy: {
      description: 'Runs the one job it took (single use, SCL-7); destroyed when that job ends.',
      entry: { type: 'report', params: { state: 'busy' } },
      on: {
        'scaler.agent.spawned': { actions: ['noteSpawned', { type: 'report', params: { state: 'busy' } }] },
        'scaler.agent.finished': { target: 'destroying', actions: { type: 'retire', params: { reason: 'job finished (single use)' } } },
        'scaler.agent.lost': { target: 'destroying', actions: { type: 'retire', params: ({ event }) => ({ reason: event.reason }) } },
        'scaler.agent.retire': { target: 'destroying', actions: { type: 'retire', params: ({ event }) => ({ reason: event.reason }) } },
      },
    },
    destroying: {
      description: 'The destroy is asked for (again after a restore); the reservation holds until it is done.',
      entry: { type: 'report', params: { state: 'destroying' } },
      on: {
        'scaler.agent.destroyed': 'destroyed',
        'scaler.agent.spawn_failed': 'destroyed',
        'scaler.agent.resume': {
          target: 'destroying',
          reenter: true,
          actions: { type: 'destroyAgent', params: ({ context }) => ({ agentId: context.agentId, backend: context.backend, reason: context.endReason ?? 'destroy after restart' }) },
        },
      },
    },
    destroyed: {
      type: 'final',
      entry: { type: 'end', params: { outcome: 'destroyed' } },
    },
    spawnFailed: {
      description: 'The backend could not start it: nothing to destroy, the reservation is freed at once.',
      type: 'final',
      entry: { type: 'end', params: { outcome: 'spawn_failed' } },
    },
  },
});

export type ScalerAgentMachine = typeof scalerAgentMachine;
export type ScalerAgentSnapshot = SnapshotFrom<ScalerAgentMachine>;
