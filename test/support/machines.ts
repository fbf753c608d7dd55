import assert from 'node:assert/strict';
import { createActor, initialTransition, transition } from 'xstate';
import type { AnyActorRef, ExecutableActionObject } from 'xstate';
import { jobMachine } from '../../machines/job.machine.ts';
import type { JobSnapshot } from '../../machines/job.machine.ts';
import type { AgentKind, JobEvent, JobInput, JobStatusData } from '../../machines/job.events.ts';
import type { AckHolder, CancelHolder } from '../../machines/job.withdrawal.ts';
import { runtimeRunMachine } from '../../actors/runs/intent-recorder.ts';
import { INTENT_KINDS } from '../../machines/intents.ts';
import type { Intent } from '../../machines/intents.ts';
import type { RunEvent, RunSnapshot } from '../../machines/run.machine.ts';
import { findStuckOnNeeds } from '../../machines/run.graph.ts';
import type { JobPlan, RunInput } from '../../machines/run.types.ts';
import type { JobStatus, TerminalJobStatus } from '../../machines/status.ts';
import { DEFAULT_JOB_TIMEOUTS, MAX_DISPATCH_ATTEMPTS } from '../../machines/types.ts';
import type { AgentRequirements, NeedEdge, StepRecord } from '../../machines/types.ts';

export type { Intent };

export const REQUIREMENTS: AgentRequirements = { runsOn: [], excludeLabels: [], runsOnPick: 'deterministic', executor: 'run-steps' };

/** runOn sets as the SDK keywords compile them (lockfile.md §5). */
export const RUN_ON = {
  success: ['success'],
  always: ['success', 'failed', 'cancelled', 'skipped', 'timed_out_stale', 'drift_dropped'],
  skip: ['success', 'skipped'],
  failure: ['failed', 'timed_out_stale'],
} satisfies Record<string, TerminalJobStatus[]>;

export function jobInput(overrides: Partial<JobInput> = {}): JobInput {
  return {
    runId: 'run-1',
    jobKey: 'build',
    baseName: 'build',
    requirements: REQUIREMENTS,
    timeouts: DEFAULT_JOB_TIMEOUTS,
    maxAttempts: MAX_DISPATCH_ATTEMPTS,
    gate: null,
    concurrency: null,
    initFailure: null,
    createdAt: 1_000,
    ...overrides,
  };
}

/** A need on `name`, satisfied by `success` unless `runOn` says otherwise. */
export function need(name: string, runOn: TerminalJobStatus[] = RUN_ON.success): NeedEdge {
  return { name, runOn };
}

export function jobPlan(key: string, overrides: Partial<JobPlan> = {}): JobPlan {
  return {
    key,
    baseName: key,
    fanoutIndex: null,
    fanoutTotal: null,
    matrixValues: null,
    needs: [],
    maxParallel: null,
    failFast: false,
    requirements: REQUIREMENTS,
    timeouts: DEFAULT_JOB_TIMEOUTS,
    concurrency: null,
    initFailure: null,
    ...overrides,
  };
}

/** The children of one fan-out job, `base (0)` … `base (n-1)`. */
export function fanout(baseName: string, total: number, overrides: Partial<JobPlan> = {}): JobPlan[] {
  return Array.from({ length: total }, (_, index) =>
    jobPlan(`${baseName} (${index})`, { baseName, fanoutIndex: index, fanoutTotal: total, ...overrides }),
  );
}

export function runInput(jobs: JobPlan[], overrides: Partial<RunInput> = {}): RunInput {
  return {
    runId: 'run-1',
    createdAt: 0,
    workflowName: 'ci',
    jobs,
    workflowTimeoutMs: null,
    approval: null,
    initFailure: null,
    maxAttempts: MAX_DISPATCH_ATTEMPTS,
    ...overrides,
  };
}

// ---- events -------------------------------------------------------------------------------

export interface Owner {
  agentId: string;
  dispatchId: string;
}

export const OWNER: Owner = { agentId: 'agent-1', dispatchId: 'dispatch-1' };

export function granted(at: number, owner: Owner = OWNER, agentKind: AgentKind = 'static'): JobEvent {
  return { type: 'placement.granted', ...owner, agentKind, at };
}
export function ack(at: number, owner: Owner = OWNER): JobEvent {
  return { type: 'agent.job.ack', ...owner, at };
}
export function reject(at: number, owner: Owner = OWNER): JobEvent {
  return { type: 'agent.job.reject', reason: 'busy', ...owner, at };
}
export function status(state: JobStatus, at: number, owner: Owner = OWNER, error?: string): JobEvent {
  return { type: 'agent.job.status', state, ...owner, at, ...(error === undefined ? {} : { error }) };
}
export function heartbeat(at: number, owner: Owner = OWNER): JobEvent {
  return { type: 'agent.job.heartbeat', ...owner, at };
}
export const STEP: StepRecord = { index: 0, name: 'build', status: 'running', hook: null, durationMs: null, exitCode: null, error: null };

export function stepStatus(at: number, owner: Owner = OWNER, step: StepRecord = STEP): JobEvent {
  return { type: 'agent.step.status', step, ...owner, at };
}
export function lost(at: number, owner: Owner = OWNER): JobEvent {
  return { type: 'agent.job.lost', ...owner, at };
}
export function reclaim(at: number, owner: Owner = OWNER): JobEvent {
  return { type: 'agent.job.reclaim', ...owner, at };
}
export function disconnected(at: number, agentId = OWNER.agentId): JobEvent {
  return { type: 'agent.disconnected', agentId, at };
}
/** The reclaim of the owner's attempt from one socket of the agent. */
export function reclaimOn(connectionId: string, at: number): JobEvent {
  return { type: 'agent.job.reclaim', ...OWNER, connectionId, at };
}
/** The owner's agent lost one of its sockets. */
export function disconnectedFrom(connectionId: string, at: number): JobEvent {
  return { type: 'agent.disconnected', agentId: OWNER.agentId, connectionId, at };
}
export function cancel(at: number, force: boolean, reason = 'cancelled by user'): JobEvent {
  return { type: 'job.cancel.requested', force, reason, at };
}

export type JobTimerKind = 'ack' | 'lease' | 'recovery' | 'replay' | 'queue' | 'cancel' | 'jobTimeout' | 'recheck' | 'fence';

/** Lease settings the host answers `ack.holder` with in these tests. */
export const LEASE = { leaseTtlMs: 10_000, leaseRenewMs: 2_000 } as const;

/** The host's answer to `askAckHolder` (machines/job.withdrawal.ts). */
export function ackHolder(at: number, holder: AckHolder = { kind: 'here' }): JobEvent {
  return { type: 'ack.holder', holder, ...LEASE, at };
}

/** The host's report of a withdrawn attempt's cancel. */
export function cancelReported(at: number, holder: CancelHolder = { kind: 'sent' }, owner: Owner = OWNER): JobEvent {
  return { type: 'cancel.reported', dispatchId: owner.dispatchId, holder, pollMs: LEASE.leaseRenewMs, at };
}

/** The firing of a job deadline exactly as armed in `context` (at its due time unless `at` says otherwise). */
export function expiry(snapshot: { context: { deadlines: Partial<Record<string, { id: string; at: number }>> } }, kind: JobTimerKind, at?: number): JobEvent {
  const armed = snapshot.context.deadlines[kind];
  assert.ok(armed, `no ${kind} deadline is armed`);
  return { type: `timer.${kind}.expired`, deadlineId: armed.id, dueAt: armed.at, at: at ?? armed.at };
}

// ---- pure transitions -----------------------------------------------------------------------

/** The intents among xstate's executable actions, as `{ type, params }`. */
export function intentsOf(actions: readonly ExecutableActionObject[]): Intent[] {
  return actions.filter((a) => INTENT_KINDS.has(a.type)).map((a) => ({ type: a.type, params: a.params }) as Intent);
}

export function startJob(input: JobInput = jobInput()): [JobSnapshot, Intent[]] {
  const [snapshot, actions] = initialTransition(jobMachine, input);
  return [snapshot, intentsOf(actions)];
}

export function stepJob(snapshot: JobSnapshot, event: JobEvent): [JobSnapshot, Intent[]] {
  const [next, actions] = transition(jobMachine, snapshot, event);
  return [next, intentsOf(actions)];
}

/** Applies events in order and returns the last snapshot with every intent recorded on the way. */
export function stepsJob(snapshot: JobSnapshot, events: readonly JobEvent[]): [JobSnapshot, Intent[]] {
  const all: Intent[] = [];
  let current = snapshot;
  for (const event of events) {
    const [next, intents] = stepJob(current, event);
    current = next;
    all.push(...intents);
  }
  return [current, all];
}

/**
 * The ack deadline passes with the agent's socket here: the job asks where it is, withdraws the
 * attempt, and its cancel is sent; the job is queued again (or fails, its attempts spent).
 */
export function ackTimesOut(snapshot: JobSnapshot, at?: number): [JobSnapshot, Intent[]] {
  const fired = expiry(snapshot, 'ack', at);
  const owner = snapshot.context.assignment;
  assert.ok(owner, 'the job holds no agent');
  return stepsJob(snapshot, [fired, ackHolder(fired.at), cancelReported(fired.at, { kind: 'sent' }, owner)]);
}

export function types(intents: readonly Intent[]): string[] {
  return intents.map((i) => i.type);
}

// ---- live run actors ------------------------------------------------------------------------

export interface RecordedIntent {
  /** `run` for the run's own intents, else the job key that recorded it. */
  by: string;
  type: Intent['type'];
  params: Intent['params'];
}

/** The runtime's own run machine, its intents handed to `record` with the chart that recorded them. */
function recordingRunMachine(record: (intent: RecordedIntent) => void) {
  return runtimeRunMachine((intent, from) => record({ by: from.jobKey ?? 'run', type: intent.type, params: intent.params }));
}

/** A live run actor whose intents are recorded, with helpers to read and drive its job children. */
export class RunHarness {
  readonly intents: RecordedIntent[] = [];
  readonly actor;
  private dispatches = 0;
  /** Called as each intent is executed, while the run is still processing the event that caused it. */
  onIntent: ((intent: RecordedIntent) => void) | null = null;

  /** Starts from `input`, or restores `persisted` (a JSON round trip of a persisted snapshot; `input` is then unused). */
  constructor(
    readonly input: RunInput,
    persisted?: unknown,
  ) {
    const machine = recordingRunMachine((intent) => {
      this.intents.push(intent);
      this.onIntent?.(intent);
    });
    this.actor = createActor(machine, persisted === undefined ? { input } : { input, snapshot: persisted as RunSnapshot });
    this.actor.start();
  }

  static start(jobs: JobPlan[], overrides: Partial<RunInput> = {}): RunHarness {
    return new RunHarness(runInput(jobs, overrides));
  }

  /** Persists, serializes to JSON and restores into a new actor, as the supervisor does on takeover. */
  restore(): RunHarness {
    const stored = JSON.parse(JSON.stringify(this.actor.getPersistedSnapshot())) as unknown;
    this.actor.stop();
    return new RunHarness(this.input, stored);
  }

  get snapshot(): RunSnapshot {
    return this.actor.getSnapshot();
  }

  private dag7 = false;

  /** From now on, assert DAG-7 after every event this harness sends. */
  watchDag7(): this {
    this.dag7 = true;
    this.assertNoneStuckOnNeeds();
    return this;
  }

  send(event: RunEvent): void {
    this.actor.send(event);
    if (this.dag7) this.assertNoneStuckOnNeeds();
  }

  /** Intents recorded since the last call. */
  take(): RecordedIntent[] {
    return this.intents.splice(0);
  }

  child(key: string): JobSnapshot {
    const ref = (this.snapshot.children as Record<string, AnyActorRef | undefined>)[key];
    assert.ok(ref, `run has no job child ${key}`);
    return ref.getSnapshot() as JobSnapshot;
  }

  /** Each job's state value, `"queued"` or `"waiting.gated"` or `"assigned.running.started"`. */
  jobStates(): Record<string, string> {
    const { jobs } = this.snapshot.context;
    // A dynamic-matrix template has no actor until its init job fans it out.
    const state = (key: string) => (jobs[key]?.template ? `template.${jobs[key].status ?? 'pending'}` : stateName(this.child(key).value));
    return Object.fromEntries(Object.keys(jobs).map((key) => [key, state(key)]));
  }

  jobState(key: string): string {
    return stateName(this.child(key).value);
  }

  /** Places a queued job on an agent with a fresh dispatch id. */
  dispatch(key: string, at: number, agentKind: AgentKind = 'static'): Owner {
    const owner = { agentId: `agent-${key}`, dispatchId: `dispatch-${++this.dispatches}` };
    this.send({ ...granted(at, owner, agentKind), jobKey: key });
    return owner;
  }

  /** Sends an agent message for `key` as its current owner. */
  fromOwner(key: string, make: (owner: Owner) => JobEvent): void {
    const assignment = this.child(key).context.assignment;
    assert.ok(assignment, `job ${key} has no agent`);
    this.send({ ...make(assignment), jobKey: key });
  }

  /** dispatch → ack → running → `state`, with what the terminal `job.status` reports. */
  runToEnd(key: string, state: TerminalJobStatus, at: number, data?: JobStatusData): void {
    this.dispatch(key, at);
    this.fromOwner(key, (o) => ack(at + 1, o));
    this.fromOwner(key, (o) => status('running', at + 2, o));
    this.fromOwner(key, (o) => ({ ...status(state, at + 3, o), ...(data && { data }) }));
  }

  /** Fires a job deadline as armed. */
  expire(key: string, kind: JobTimerKind, at?: number): void {
    this.send({ ...expiry(this.child(key), kind, at), jobKey: key });
  }

  /** The job's ack deadline passes with its agent's socket here, and the attempt's cancel is sent (`ackTimesOut`). */
  ackTimesOut(key: string, at?: number): void {
    const owner = this.child(key).context.assignment;
    assert.ok(owner, `job ${key} has no agent`);
    const fired = expiry(this.child(key), 'ack', at);
    this.send({ ...fired, jobKey: key });
    this.send({ ...ackHolder(fired.at), jobKey: key });
    this.send({ ...cancelReported(fired.at, { kind: 'sent' }, owner), jobKey: key });
  }

  /** DAG-7: no job waits on needs while every upstream is terminal, in the run's graph or in the job itself. */
  assertNoneStuckOnNeeds(): void {
    const { jobs, groups } = this.snapshot.context;
    assert.deepEqual(findStuckOnNeeds(jobs, groups), [], 'DAG-7: job waiting on needs whose upstreams are all terminal');
    for (const [key, node] of Object.entries(jobs)) {
      if (!node.decided || node.template) continue;
      assert.notEqual(this.jobState(key), 'waiting.gated', `DAG-7: ${key} was released or skipped but still waits`);
    }
  }
}

export function stateName(value: unknown): string {
  if (typeof value === 'string') return value;
  const [key, inner] = Object.entries(value as Record<string, unknown>)[0] ?? [];
  assert.ok(key !== undefined, 'empty state value');
  return `${key}.${stateName(inner)}`;
}

// ---- canonical job stages (created at 1 000, placed at 2 000, acked at 2 100, running at 2 200) ----

export const T = { created: 1_000, granted: 2_000, ack: 2_100, running: 2_200 } as const;

export function queuedJob(input: JobInput = jobInput()): JobSnapshot {
  return startJob(input)[0];
}
export function dispatchedJob(agentKind: AgentKind = 'static', input: JobInput = jobInput()): JobSnapshot {
  return stepJob(queuedJob(input), granted(T.granted, OWNER, agentKind))[0];
}
export function acceptedJob(agentKind: AgentKind = 'static', input: JobInput = jobInput()): JobSnapshot {
  return stepJob(dispatchedJob(agentKind, input), ack(T.ack))[0];
}
export function startedJob(agentKind: AgentKind = 'static', input: JobInput = jobInput()): JobSnapshot {
  return stepJob(acceptedJob(agentKind, input), status('running', T.running))[0];
}

/** Expected intents of the job `build` (or `jobKey`), spelled as the machine records them. */
export const intent = {
  arm: (kind: JobTimerKind, at: number, jobKey = 'build'): Intent => ({
    type: 'armDeadline',
    params: { id: `${jobKey}#${kind}`, kind, at, jobKey },
  }),
  disarm: (kind: JobTimerKind, jobKey = 'build'): Intent => ({ type: 'disarmDeadline', params: { id: `${jobKey}#${kind}`, jobKey } }),
  placement: (attempt: number, jobKey = 'build'): Intent => ({
    type: 'requestPlacement',
    params: { jobKey, requirements: REQUIREMENTS, attempt },
  }),
  dispatch: (attempt: number, owner: Owner = OWNER, jobKey = 'build'): Intent => ({
    type: 'sendDispatch',
    params: { jobKey, ...owner, attempt, job: { baseName: jobKey, matrix: null, initFor: null, upstream: null, resolved: null } },
  }),
  cancel: (force: boolean, reason: string, owner: Owner = OWNER, jobKey = 'build', report?: true): Intent => ({
    type: 'sendCancel',
    params: { jobKey, ...owner, force, reason, ...(report && { report }) },
  }),
  askAckHolder: (owner: Owner = OWNER, jobKey = 'build'): Intent => ({ type: 'askAckHolder', params: { jobKey, agentId: owner.agentId } }),
  releaseSlot: (owner: Owner = OWNER): Intent => ({ type: 'releaseSlot', params: { ...owner } }),
};
