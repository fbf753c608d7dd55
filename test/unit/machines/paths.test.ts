import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { getInitialMicrosteps, getMicrosteps } from 'xstate';
import type { AnyStateMachine, AnyStateNode } from 'xstate';
import { adjacencyMapToArray, getAdjacencyMap, getShortestPaths, getStateNodes } from 'xstate/graph';
import { jobMachine } from '../../../machines/job.machine.ts';
import type { JobSnapshot } from '../../../machines/job.machine.ts';
import type { JobEvent, JobInput } from '../../../machines/job.events.ts';
import { runMachine } from '../../../machines/run.machine.ts';
import type { RunEvent, RunSnapshot } from '../../../machines/run.machine.ts';
import type { RunInput } from '../../../machines/run.types.ts';
import { gateIdOf } from '../../../machines/environment.ts';
import { TERMINAL_JOB_STATUSES } from '../../../machines/status.ts';
import { DEFAULT_JOB_TIMEOUTS } from '../../../machines/types.ts';
import { STEP, ackHolder, cancel, cancelReported, jobInput, jobPlan, need, runInput } from '../../support/machines.ts';
import type { AckHolder, CancelHolder } from '../../../machines/job.withdrawal.ts';

const AT = 5_000;

/** Ids of the state nodes a snapshot value is in, e.g. `job.assigned`, `job.assigned.running`. */
function activeIds(machineId: string, value: unknown, prefix = machineId): string[] {
  if (typeof value === 'string') return [`${prefix}.${value}`];
  return Object.entries(value as Record<string, unknown>).flatMap(([key, inner]) => [
    `${prefix}.${key}`,
    ...activeIds(machineId, inner, `${prefix}.${key}`),
  ]);
}

function allStateIds(machine: AnyStateMachine): string[] {
  return getStateNodes(machine.root).map((node: AnyStateNode) => node.id);
}

/** One event of every type, matching the current owner and the armed deadlines. */
function jobEvents(snapshot: JobSnapshot): JobEvent[] {
  const { assignment, attempt, deadlines } = snapshot.context;
  const owner = assignment ?? { agentId: 'agent-1', dispatchId: 'none' };
  const next = { agentId: 'agent-1', dispatchId: `dispatch-${attempt + 1}` };
  const fromOwner = { ...owner, at: AT };
  const timers = Object.entries(deadlines).map(
    ([kind, armed]) => ({ type: `timer.${kind}.expired`, deadlineId: armed.id, dueAt: armed.at, at: armed.at }) as JobEvent,
  );
  return [
    { type: 'job.release', at: AT },
    { type: 'job.gate', reason: { kind: 'wave', message: 'wave' }, at: AT },
    { type: 'job.skip', reason: 'upstream failed', at: AT },
    cancel(AT, false),
    cancel(AT, true),
    { type: 'concurrency.granted', at: AT },
    { type: 'concurrency.queued', position: 2, at: AT },
    { type: 'placement.granted', ...next, agentKind: 'static', at: AT },
    { type: 'placement.granted', ...next, agentKind: 'scaler', at: AT },
    { type: 'placement.none', reason: { kind: 'capacity', message: 'busy' }, at: AT },
    { type: 'placement.refused', message: 'queue full', at: AT },
    { type: 'provision.failed', message: 'spawn failed', at: AT },
    { type: 'agent.job.ack', ...fromOwner },
    { type: 'agent.job.reject', reason: 'busy', ...fromOwner },
    ...(['running', 'cancelling', ...TERMINAL_JOB_STATUSES] as const).map(
      (state): JobEvent => ({ type: 'agent.job.status', state, ...fromOwner }),
    ),
    { type: 'agent.job.heartbeat', ...fromOwner },
    { type: 'agent.step.status', step: STEP, ...fromOwner },
    { type: 'agent.job.reclaim', ...fromOwner },
    { type: 'agent.job.lost', ...fromOwner },
    { type: 'agent.disconnected', agentId: owner.agentId, at: AT },
    { type: 'job.restored', liveAgents: [], at: AT },
    { type: 'job.restored', liveAgents: [owner.agentId], at: AT },
    ...(['approve', 'reject'] as const).map((decision): JobEvent => ({ type: 'job.approval', gateId: gateIdOf('build'), decision, by: 'alice', at: AT })),
    ...ACK_HOLDERS.map((holder) => ackHolder(AT, holder)),
    ...CANCEL_HOLDERS.map((holder) => cancelReported(AT, holder, { agentId: owner.agentId, dispatchId: snapshot.context.withdrawal?.dispatchId ?? 'none' })),
    { type: 'fence.checked', lifted: true, at: AT },
    { type: 'fence.checked', lifted: false, at: AT },
    ...timers,
  ];
}

/**
 * Where an overdue attempt's agent may be, answered at AT, before its ack deadline (granted at AT + 10 s)
 * with the lease settings of `LEASE` (10 s, renewed every 2 s): a peer whose lease ran out, one not
 * renewing, one renewing but not since the deadline, one renewing since.
 */
const ACK_HOLDERS: AckHolder[] = [
  { kind: 'here' },
  { kind: 'none' },
  { kind: 'unknown' },
  { kind: 'session', coordinatorId: 'peer', leaseUntil: AT - 1 },
  { kind: 'session', coordinatorId: 'peer', leaseUntil: AT + 1_000 },
  { kind: 'session', coordinatorId: 'peer', leaseUntil: AT + 9_000 },
  { kind: 'session', coordinatorId: 'peer', leaseUntil: AT + 30_000 },
];

const CANCEL_HOLDERS: CancelHolder[] = [{ kind: 'sent' }, { kind: 'peer', coordinatorId: 'peer', commandId: 7 }, { kind: 'unreachable' }];

/** Value plus the context that steers guards; times are left out so the space stays finite. */
function serializeJob(snapshot: JobSnapshot): string {
  const c = snapshot.context;
  return JSON.stringify([snapshot.value, c.attempt, c.assignment?.agentKind, c.holdsConcurrency, Object.keys(c.deadlines).sort(), c.approval?.status]);
}

const JOB_INPUTS: Record<string, JobInput> = {
  plain: jobInput(),
  gated: jobInput({ gate: { kind: 'needs', message: 'waiting for upstream jobs: a' } }),
  concurrency: jobInput({ concurrency: { key: 'acme::deploy', policy: { cancelInProgress: false, max: 1 } } }),
  initFailure: jobInput({ initFailure: { scope: 'job', category: 'dynamic_eval', message: 'boom', jobName: 'build' } }),
  backstop: jobInput({ timeouts: { ...DEFAULT_JOB_TIMEOUTS, jobTimeoutMs: 60_000 } }),
  held: jobInput({ hold: { environment: 'prod', kind: 'approval', expiresInMs: 3_600_000, why: 'approval required' } }),
};

describe('path coverage: job machine', () => {
  const options = (input: JobInput) => ({ input, events: jobEvents, serializeState: serializeJob });
  const reached = new Set<string>();
  const passedThrough = new Set<string>();
  for (const input of Object.values(JOB_INPUTS)) {
    for (const path of getShortestPaths(jobMachine, options(input))) {
      for (const id of activeIds('job', path.state.value)) reached.add(id);
    }
    for (const [snapshot] of getInitialMicrosteps(jobMachine, input)) {
      for (const id of activeIds('job', snapshot.value)) passedThrough.add(id);
    }
    for (const { state, event } of adjacencyMapToArray(getAdjacencyMap<JobSnapshot, JobEvent, JobInput>(jobMachine, options(input)))) {
      for (const [snapshot] of getMicrosteps(jobMachine, state, event)) {
        for (const id of activeIds('job', snapshot.value)) passedThrough.add(id);
      }
    }
  }

  it('every final state is reached by some shortest path', () => {
    for (const status of TERMINAL_JOB_STATUSES) assert.ok(reached.has(`job.${status}`), `job.${status} is unreachable`);
  });

  it('every state node is entered on some edge (transient ones in a microstep)', () => {
    const missing = allStateIds(jobMachine).filter((id) => id !== 'job' && !passedThrough.has(id));
    assert.deepEqual(missing, []);
  });

  it('G-5: a job that is pending, whatever it waits for (upstreams, an approval, its concurrency group, an agent), names its reason', () => {
    const silent = new Set<string>();
    for (const input of Object.values(JOB_INPUTS)) {
      for (const { state, event } of adjacencyMapToArray(getAdjacencyMap<JobSnapshot, JobEvent, JobInput>(jobMachine, options(input)))) {
        for (const snapshot of [state, ...getMicrosteps(jobMachine, state, event).map(([next]) => next)]) {
          if (snapshot.hasTag('status:pending') && snapshot.context.waiting === null) silent.add(JSON.stringify(snapshot.value));
        }
      }
    }
    assert.deepEqual([...silent], []);
  });

  it('every resting state node is the end of some shortest path', () => {
    const transient = ['job.created', 'job.admitted', 'job.queueExpired', 'job.requeued', 'job.requeueing'];
    const missing = allStateIds(jobMachine).filter((id) => id !== 'job' && !transient.includes(id) && !reached.has(id));
    assert.deepEqual(missing, []);
  });
});

function runEvents(snapshot: RunSnapshot): RunEvent[] {
  const { jobs, deadlines } = snapshot.context;
  const open = Object.entries(jobs).filter(([, node]) => node.status === null).map(([key]) => key);
  const timers = Object.entries(deadlines).map(
    ([kind, armed]) => ({ type: `timer.${kind}.expired`, deadlineId: armed.id, dueAt: armed.at, at: armed.at }) as RunEvent,
  );
  return [
    ...open.flatMap((jobKey): RunEvent[] => [
      { type: 'job.started', jobKey, at: AT },
      ...(['success', 'failed', 'cancelled'] as const).map((status) => ({ type: 'job.finished' as const, jobKey, status, reason: null, at: AT })),
    ]),
    { type: 'run.cancel', reason: 'stop', force: false, by: 'alice', at: AT },
    { type: 'run.cancel', reason: 'stop', force: true, by: 'alice', at: AT },
    { type: 'run.approval', decision: 'approved', by: 'alice', at: AT },
    { type: 'run.approval', decision: 'rejected', by: 'alice', at: AT },
    { type: 'run.restored', liveAgents: [], at: AT },
    ...timers,
  ];
}

function serializeRun(snapshot: RunSnapshot): string {
  const c = snapshot.context;
  const statuses = Object.values(c.jobs).map((node) => node.status);
  return JSON.stringify([snapshot.value, statuses, c.cancel?.force, c.workflowTimedOut, Object.keys(c.deadlines).sort()]);
}

describe('path coverage: run machine', () => {
  const plans = [jobPlan('a'), jobPlan('b', { needs: [need('a')] })];
  const RUN_INPUTS: RunInput[] = [
    runInput(plans, { workflowTimeoutMs: 60_000 }),
    runInput(plans, { workflowTimeoutMs: 60_000, approval: { timeoutMs: 3_600_000 } }),
    runInput(plans, { initFailure: { scope: 'run', category: 'lock_resolution', message: 'corrupt lock file' } }),
  ];
  const reached = new Set<string>();
  const passedThrough = new Set<string>();
  for (const input of RUN_INPUTS) {
    const options = { input, events: runEvents, serializeState: serializeRun };
    const pass = (value: unknown) => activeIds('run', value).forEach((id) => passedThrough.add(id));
    for (const path of getShortestPaths(runMachine, options)) activeIds('run', path.state.value).forEach((id) => reached.add(id));
    for (const [snapshot] of getInitialMicrosteps(runMachine, input)) pass(snapshot.value);
    for (const { state, event } of adjacencyMapToArray(getAdjacencyMap<RunSnapshot, RunEvent, RunInput>(runMachine, options))) {
      for (const [snapshot] of getMicrosteps(runMachine, state, event)) pass(snapshot.value);
    }
  }

  it('every resting run state is reached by some shortest path', () => {
    for (const state of ['active.pending', 'active.held', 'active.running', 'cancelling', 'success', 'failed', 'cancelled']) {
      assert.ok(reached.has(`run.${state}`), `run.${state} is unreachable`);
    }
  });

  it('every state node, the transient starting and finishing included, is entered on some edge', () => {
    const missing = allStateIds(runMachine).filter((id) => id !== 'run' && !passedThrough.has(id));
    assert.deepEqual(missing, []);
  });
});
