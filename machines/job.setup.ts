import { assign, assertEvent, enqueueActions, setup } from 'xstate';
import type { ParameterizedObject } from 'xstate';
import type { JobEvent, JobInput, JobReport, RecoveryCause } from './job.events.ts';
import { deadlineAt, stamped, timeOf } from './job.context.ts';
import type { JobContext, JobDeadlineKind, JobResult, TimerKind } from './job.context.ts';
import { JOB_INTENTS, intentSlots } from './intents.ts';
import type { Intent, JobIntentKind } from './intents.ts';
import { closeGate, closedOutcome, decides, openGate } from './job.approval.ts';
import { failureReasonOf, interruptSteps, mergeStepResults, upsertStep } from './job.results.ts';
import { isTerminalJobStatus } from './status.ts';
import type { JobStatusTag, TerminalJobStatus } from './status.ts';
import type { WaitingReason } from './types.ts';
import { ackVerdict, fenceMessage } from './job.withdrawal.ts';
import type { AckHoldPhase, AckVerdict, Withdrawal } from './job.withdrawal.ts';

export type { JobContext, JobResult } from './job.context.ts';

/** The socket went with the coordinator that held it (this one restarted, or a peer stopped), or the agent's own socket closed. */
function recoveryCauseOf(event: Ev): RecoveryCause {
  if (event.type === 'job.restored') return 'coordinator_restart';
  if (event.type === 'agent.disconnected') return event.cause === 'coordinator' ? 'coordinator_restart' : 'disconnect';
  return 'reconnect';
}

const RECONNECTED_AFTER: Record<RecoveryCause, string> = {
  coordinator_restart: ' after the coordinator restarted',
  disconnect: ' after losing its connection',
  reconnect: '',
};

/** "agent X reconnected after the coordinator restarted and did not report job Y", and what happens next. */
export function lostOutcome(context: JobContext, started: boolean): string {
  const agent = context.assignment?.agentId ?? 'unknown';
  const after = RECONNECTED_AFTER[context.assignment?.recovery ?? 'reconnect'];
  const next = started ? '' : ' before starting it; it is tried again';
  return `agent ${agent} reconnected${after} and did not report job ${context.spec.jobKey}${next}`;
}

function attemptsExhausted(context: JobContext): string {
  return `re-dispatch attempts exhausted after ${context.attempt} attempts`;
}

type Ev = JobEvent;

/**
 * What a job state says about itself when asked (`snapshot.hasTag`): the status it shows, whether it
 * holds an agent slot or waits for one, and whether its attempt lives on awaiting the agent's reclaim.
 */
export type JobTag = JobStatusTag | 'waits-for-agent' | 'holds-slot' | 'awaits-reclaim';

/** Intents a job records (machines/intents.ts); the host provides their implementations (docs/architecture.md#time-durable-deadlines). */
export type JobIntent = Intent<JobIntentKind>;

type Params = ParameterizedObject['params'] | undefined;

/** The job's report to its run, enqueued by name. */
type TellRun = { type: 'tellRun'; params: { report: JobReport } };

/** enqueueActions, typed to enqueue the job's intents (and its reports to its run) by name. */
function compose<P extends Params = undefined>(
  collect: Parameters<typeof enqueueActions<JobContext, Ev, P, Ev, never, JobIntent | TellRun, never>>[0],
) {
  return enqueueActions<JobContext, Ev, P, Ev, never, JobIntent | TellRun, never>(collect);
}

/** assign, typed for parameterized actions. */
function update<P extends Params>(assignment: Parameters<typeof assign<JobContext, Ev, P, Ev, never>>[0]) {
  return assign<JobContext, Ev, P, Ev, never>(assignment);
}

function isFromAssigned(context: JobContext, event: Ev): boolean {
  return (
    'dispatchId' in event &&
    'agentId' in event &&
    context.assignment !== null &&
    event.agentId === context.assignment.agentId &&
    event.dispatchId === context.assignment.dispatchId
  );
}

/** The agent holding the attempt lost its socket: not a socket the attempt was reclaimed from since (docs/protocol.md#reconnect-reclaim-and-lost-attempts). */
function isAssignedAgentLost(context: JobContext, event: Ev): boolean {
  if (event.type !== 'agent.disconnected' || context.assignment?.agentId !== event.agentId) return false;
  const holder = context.assignment.connectionId;
  return holder === undefined || event.connectionId === undefined || event.connectionId === holder;
}

/** A single-use scaler agent that disconnected is gone for good, unless only its coordinator went (FO-2). */
function isLostScalerAgent(context: JobContext, event: Ev): boolean {
  return isAssignedAgentLost(context, event) && context.assignment?.agentKind === 'scaler' && !('cause' in event && event.cause === 'coordinator');
}

const TERMINAL_REPORTS = ['success', 'failed', 'cancelled', 'skipped', 'drift_dropped', 'timed_out_stale'] as const;

/** A terminal `job.status` from the agent that owns the attempt ends the job as reported (docs/protocol.md#status-handling). */
export const endAsReported = TERMINAL_REPORTS.map((state) => ({
  guard: { type: 'assignedReports' as const, params: { state } },
  target: `#job.${state}`,
  actions: 'recordReport' as const,
}));

const jobBase = setup({
  types: {
    context: {} as JobContext,
    events: {} as Ev,
    input: {} as JobInput,
    tags: {} as JobTag,
  },
  actions: {
    // Host-provided intents (docs/architecture.md#time-durable-deadlines). The slots do nothing: machines perform no I/O.
    ...intentSlots(JOB_INTENTS),
    /**
     * What the job tells its run (`job.started`, `job.finished`). A job chart on its own (tests, the
     * visualizer) tells no one; the run spawns `jobMachineOfRun`, which sends it to its parent.
     */
    tellRun: (_args, _params: { report: JobReport }) => {},
  },
  guards: {
    hasInitFailure: ({ context }) => context.initFailure !== null,
    isGated: ({ context }) => context.waiting !== null,
    needsConcurrency: ({ context }) => context.concurrency !== null && !context.holdsConcurrency,
    fromAssignedAgent: ({ context, event }) => isFromAssigned(context, event),
    assignedAgentLost: ({ context, event }) => isAssignedAgentLost(context, event),
    /** After a restore, the agent holding the attempt has no session anywhere: its socket went with the old process. */
    assignedAgentGone: ({ context, event }) =>
      event.type === 'job.restored' && context.assignment !== null && !event.liveAgents.includes(context.assignment.agentId),
    isCurrentDeadline: ({ context, event }, params: { kind: JobDeadlineKind }) => {
      const armed = context.deadlines[params.kind];
      return 'deadlineId' in event && armed !== undefined && armed.id === event.deadlineId && armed.at === event.dueAt;
    },
    assignedReports: ({ context, event }, params: { state: string }) =>
      event.type === 'agent.job.status' && event.state === params.state && isFromAssigned(context, event),
    assignedReportsProgress: ({ context, event }) =>
      event.type === 'agent.job.status' && !isTerminalJobStatus(event.state) && isFromAssigned(context, event),
    lostScalerAgent: ({ context, event }) => isLostScalerAgent(context, event),
    isForced: ({ event }) => event.type === 'job.cancel.requested' && event.force,
    attemptsLeft: ({ context }) => context.attempt < context.spec.maxAttempts,
    attemptsLeftAfterThis: ({ context }) => context.attempt + 1 < context.spec.maxAttempts,
    everDispatched: ({ context }) => context.attempt > 0,
    queueExpires: ({ context }) => context.spec.timeouts.queueMs > 0,
    awaitsApproval: ({ context }) => context.hold !== null && context.approval === null,
    /** The verdict on an overdue ack (machines/job.withdrawal.ts) is `is`: deliver, lost, or a wait in that phase. */
    ackVerdictIs: ({ context, event }, params: { phase: AckHoldPhase; is: 'deliver' | 'lost' | AckHoldPhase }) => {
      const verdict = overdueVerdict(context, event, params.phase);
      return verdict !== null && (verdict.kind === 'wait' ? verdict.phase : verdict.kind) === params.is;
    },
    reportsWithdrawnCancel: ({ context, event }) => event.type === 'cancel.reported' && event.dispatchId === context.withdrawal?.dispatchId,
    cancelWentOut: ({ context, event }) => event.type === 'cancel.reported' && event.dispatchId === context.withdrawal?.dispatchId && event.holder.kind === 'sent',
    fenceLifted: ({ event }) => event.type === 'fence.checked' && event.lifted,
    approves: ({ context, event }) => decides(context.approval, event, 'approve'),
    rejects: ({ context, event }) => decides(context.approval, event, 'reject'),
  },
});

export const jobSetup = jobBase.extend({
  actions: {
    arm: compose<{ kind: TimerKind }>(({ context, event, enqueue }, params) => {
      armIn(context, enqueue, params.kind, deadlineAt(context, params.kind, timeOf(context, event)));
    }),
    disarm: compose<{ kind: JobDeadlineKind }>(({ context, enqueue }, params) => {
      const armed = context.deadlines[params.kind];
      if (!armed) return;
      const { [params.kind]: _dropped, ...rest } = context.deadlines;
      enqueue.assign({ deadlines: rest });
      enqueue({ type: 'disarmDeadline', params: { id: armed.id, jobKey: context.spec.jobKey } });
    }),
    disarmAll: compose(({ context, enqueue }) => {
      for (const armed of Object.values(context.deadlines)) {
        enqueue({ type: 'disarmDeadline', params: { id: armed.id, jobKey: context.spec.jobKey } });
      }
      enqueue.assign({ deadlines: {} });
    }),
    cancelOnAgent: compose<{ force: boolean; reason: string; report?: boolean }>(({ context, enqueue }, params) => {
      if (!context.assignment) return;
      const { agentId, dispatchId } = context.assignment;
      enqueue({ type: 'sendCancel', params: { jobKey: context.spec.jobKey, agentId, dispatchId, ...params } });
    }),
    /**
     * Leaving `assigned` frees the agent's slot, except when an overdue ack's answer withdraws the
     * attempt: `withdrawing` closes the connection first and frees the slot after, so the slot is never
     * offered on a socket about to be closed (`after: true` is that explicit release).
     */
    freeSlot: compose<{ after?: boolean } | undefined>(({ context, event, enqueue }, params) => {
      if (!context.assignment) return;
      if (event.type === 'ack.holder' && params?.after !== true) return;
      const { agentId, dispatchId } = context.assignment;
      enqueue({ type: 'releaseSlot', params: { agentId, dispatchId } });
    }),
    askForPlacement: compose<{ again?: boolean } | undefined>(({ context, enqueue }, params) => {
      const { jobKey, requirements } = context.spec;
      const { attempt } = context;
      const heldReason = params?.again === true ? context.waiting?.message : undefined;
      enqueue({ type: 'requestPlacement', params: heldReason === undefined ? { jobKey, requirements, attempt } : { jobKey, requirements, attempt, heldReason } });
    }),
    askForConcurrency: compose(({ context, enqueue }) => {
      if (!context.concurrency) return;
      const { key, policy } = context.concurrency;
      enqueue({ type: 'requestConcurrency', params: { jobKey: context.spec.jobKey, key, policy } });
    }),
    startAttempt: assign(({ context, event }) => {
      assertEvent(event, 'placement.granted');
      const { agentId, dispatchId, agentKind } = event;
      return { attempt: context.attempt + 1, assignment: { agentId, dispatchId, agentKind }, waiting: null, steps: [], result: null };
    }),
    dispatch: compose(({ context, enqueue }) => {
      if (!context.assignment) return;
      const { agentId, dispatchId } = context.assignment;
      const { baseName, matrix, initFor } = context.spec;
      const { upstream, resolved } = context;
      const job = { baseName, matrix, initFor, upstream, resolved };
      enqueue({ type: 'sendDispatch', params: { jobKey: context.spec.jobKey, agentId, dispatchId, attempt: context.attempt, job } });
    }),
    wait: assign(({ context, event }) => {
      assertEvent(event, ['placement.none', 'job.gate', 'concurrency.queued']);
      if (event.type !== 'concurrency.queued') {
        const scalerError = event.reason.kind === 'scaler_failed' ? event.reason.message : null;
        return { waiting: event.reason, lastProvisioningError: scalerError ?? context.lastProvisioningError };
      }
      if (!context.concurrency) return {};
      return { waiting: { kind: 'concurrency' as const, message: groupWaitMessage(context.concurrency.key, `position ${event.position}`) } };
    }),
    noteProvisioningFailure: assign(({ context, event }) => {
      assertEvent(event, 'provision.failed');
      const waiting: WaitingReason = { kind: 'scaler_failed', message: event.message };
      return { attempt: context.attempt + 1, lastProvisioningError: event.message, waiting };
    }),
    enter: update<{ status: string }>(({ context, event }, params) => ({
      enteredAt: stamped(context.enteredAt, params.status, timeOf(context, event)),
    })),
    setOutcome: update<{ outcome: string }>((_, params) => ({ outcome: params.outcome })),
    outcomeFromEvent: assign(({ event }) => {
      assertEvent(event, ['job.skip', 'job.cancel.requested']);
      return { outcome: event.reason };
    }),
    failNoAgent: update<{ message: string }>(({ context }, params) => ({
      outcome: params.message,
      initFailure: { scope: 'job' as const, category: 'no_agent' as const, message: params.message, jobName: context.spec.jobKey },
    })),
    clearAssignment: assign({ assignment: null }),
    /** Entering `recovering`: the attempt remembers why, for the words of a loss. */
    noteRecovery: assign(({ context, event }) => (context.assignment ? { assignment: { ...context.assignment, recovery: recoveryCauseOf(event) } } : {})),
    /** Restored while it waits for its agent: the coordinator restarted meanwhile, whatever told the job its agent was gone. */
    noteRestart: assign(({ context }) => (context.assignment ? { assignment: { ...context.assignment, recovery: 'coordinator_restart' as const } } : {})),
    /** The agent registered again without the attempt and replayed nothing for it in time. */
    setLostOutcome: update<{ started: boolean }>(({ context }, params) => ({ outcome: lostOutcome(context, params.started) })),
    /** The attempt now lives on the socket that reclaimed it; a disconnect of another socket of the agent is stale. */
    recordReclaim: assign(({ context, event }) => {
      assertEvent(event, 'agent.job.reclaim');
      if (!context.assignment || event.connectionId === undefined) return {};
      return { assignment: { ...context.assignment, connectionId: event.connectionId } };
    }),
    /** A grant that arrives when the job no longer waits for one: the slot reserved for it goes back. */
    releaseStaleGrant: compose(({ event, enqueue }) => {
      assertEvent(event, 'placement.granted');
      enqueue({ type: 'releaseSlot', params: { agentId: event.agentId, dispatchId: event.dispatchId } });
    }),
    takeRelease: assign(({ context, event }) => {
      assertEvent(event, 'job.release');
      return {
        waiting: null,
        upstream: event.upstream ?? context.upstream,
        resolved: event.resolved ?? context.resolved,
        concurrency: event.concurrency ?? context.concurrency,
        hold: event.hold !== undefined ? event.hold : context.hold,
      };
    }),
    failInit: assign(({ event }) => {
      assertEvent(event, 'job.init.failed');
      return { initFailure: event.failure, outcome: event.failure.message };
    }),
    recordStep: assign(({ context, event }) => {
      assertEvent(event, 'agent.step.status');
      return { steps: upsertStep(context.steps, event.step) };
    }),
    /** A terminal `job.status`: its results are kept and the reason is the agent's error or the failed step's. */
    recordReport: assign(({ context, event }) => {
      assertEvent(event, 'agent.job.status');
      const steps = mergeStepResults(context.steps, event.data?.stepResults);
      const data = event.data;
      const result: JobResult = { durationMs: data?.durationMs ?? null, outputs: data?.outputs ?? null, initResult: data?.initResult ?? null };
      // A job cancelled here already says why (the cancel's reason); the agent's words come second.
      const cancelReason = event.state === 'cancelled' ? context.outcome : null;
      return { steps, result, outcome: cancelReason ?? failureReasonOf(event.error, steps) };
    }),
    setOutcomeExhausted: assign(({ context }) => ({ outcome: attemptsExhausted(context) })),
    setOutcomeQueueExpired: assign(({ context }) => ({
      outcome: `queue timeout passed; last reason: ${context.lastProvisioningError ?? context.waiting?.message ?? 'none'}`,
    })),
    failQueueExpired: assign(({ context }) => {
      const message = `no agent became available within the queue timeout (${context.waiting?.message ?? 'queued'})`;
      return {
        outcome: message,
        initFailure: { scope: 'job' as const, category: 'no_agent' as const, message, jobName: context.spec.jobKey },
      };
    }),
    closeForAckTimeout: compose(({ context, enqueue }) => {
      if (!context.assignment) return;
      enqueue({ type: 'closeAgentConnection', params: { agentId: context.assignment.agentId, code: 4031, reason: 'dispatch ack timeout' } });
    }),
    cancelGracefully: compose(({ context, event, enqueue }) => {
      assertEvent(event, 'job.cancel.requested');
      if (!context.assignment) return;
      const { agentId, dispatchId } = context.assignment;
      enqueue({ type: 'sendCancel', params: { jobKey: context.spec.jobKey, agentId, dispatchId, force: false, reason: event.reason } });
    }),
    askWhereAgentIs: compose(({ context, enqueue }) => {
      if (context.assignment) enqueue({ type: 'askAckHolder', params: { jobKey: context.spec.jobKey, agentId: context.assignment.agentId } });
    }),
    /** Ask again after the verdict's wait. */
    armAckRecheck: compose<{ phase: AckHoldPhase }>(({ context, event, enqueue }, params) => {
      const verdict = overdueVerdict(context, event, params.phase);
      if (verdict?.kind === 'wait') armIn(context, enqueue, 'recheck', timeOf(context, event) + verdict.ms);
    }),
    /** The agent's socket is gone: the job hears it as a disconnect of that cause, and goes recovering (or requeues a lost scaler agent's attempt). */
    raiseAgentLost: compose<{ phase: AckHoldPhase }>(({ context, event, enqueue }, params) => {
      const verdict = overdueVerdict(context, event, params.phase);
      if (verdict?.kind !== 'lost' || !context.assignment) return;
      enqueue.raise({ type: 'agent.disconnected', agentId: context.assignment.agentId, cause: verdict.cause, at: timeOf(context, event) });
    }),
    openWithdrawal: compose(({ context, event, enqueue }) => {
      if (!context.assignment) return;
      const at = timeOf(context, event);
      const withdrawal: Withdrawal = { agentId: context.assignment.agentId, dispatchId: context.assignment.dispatchId, raisedAt: at, fence: null };
      enqueue.assign({ withdrawal, waiting: { kind: 'previous_attempt', message: fenceMessage(withdrawal) } });
      // The hold ends here whatever the answers (a database that never answers must not hold the job for
      // ever): the longest a withdrawn attempt's agent may take to come back, as for an agent lost before its deadline.
      armIn(context, enqueue, 'fence', at + context.spec.timeouts.recoveryMs);
    }),
    raiseFence: compose(({ context, event, enqueue }) => {
      assertEvent(event, 'cancel.reported');
      if (!context.withdrawal || event.holder.kind === 'sent') return;
      const peer = event.holder.kind === 'peer' ? event.holder : null;
      const fence = { coordinatorId: peer?.coordinatorId ?? null, commandId: peer?.commandId ?? null, pollMs: event.pollMs };
      const withdrawal = { ...context.withdrawal, fence };
      enqueue.assign({ withdrawal, waiting: { kind: 'previous_attempt', message: fenceMessage(withdrawal) } });
    }),
    armFencePoll: compose(({ context, event, enqueue }) => {
      const fence = context.withdrawal?.fence;
      if (fence) armIn(context, enqueue, 'recheck', timeOf(context, event) + fence.pollMs);
    }),
    askWhetherCancelWentOut: compose(({ context, enqueue }) => {
      const withdrawal = context.withdrawal;
      if (withdrawal) enqueue({ type: 'checkCancelFence', params: { jobKey: context.spec.jobKey, agentId: withdrawal.agentId, commandId: withdrawal.fence?.commandId ?? null } });
    }),
    closeWithdrawal: assign({ withdrawal: null, waiting: null }),
    armJobTimeoutBackstop: compose(({ context, event, enqueue }) => {
      if (context.spec.timeouts.jobTimeoutMs === null || context.deadlines.jobTimeout !== undefined) return;
      armIn(context, enqueue, 'jobTimeout', deadlineAt(context, 'jobTimeout', timeOf(context, event)));
    }),
    holdConcurrency: assign({ holdsConcurrency: true, waiting: null }),
    /** Entering `waiting.concurrency`: until its group answers, the job says it asked (G-5). */
    awaitConcurrency: assign(({ context }) =>
      context.concurrency ? { waiting: { kind: 'concurrency' as const, message: groupWaitMessage(context.concurrency.key, null) } } : {},
    ),
    /** Entering `waiting.approval`: the gate opens, its deadline is armed and its record written. */
    openApprovalGate: compose(({ context, event, enqueue }) => {
      if (!context.hold) return;
      const at = timeOf(context, event);
      const { gate, waiting } = openGate(context.spec.jobKey, context.hold, at);
      const id = `${context.spec.jobKey}#approval`;
      enqueue.assign({ approval: gate, waiting, deadlines: { ...context.deadlines, approval: { id, at: gate.expiresAt } } });
      enqueue({ type: 'armDeadline', params: { id, kind: 'approval', at: gate.expiresAt, jobKey: context.spec.jobKey } });
      enqueue({ type: 'recordApprovalGate', params: { jobKey: context.spec.jobKey, gate } });
    }),
    /** Leaving it, however: the gate is decided once and its record written; its deadline goes. */
    closeApprovalGate: compose(({ context, event, enqueue }) => {
      if (context.approval?.status !== 'pending') return;
      const gate = closeGate(context.approval, event, timeOf(context, event));
      enqueue.assign({ approval: gate, waiting: null });
      enqueue({ type: 'recordApprovalGate', params: { jobKey: context.spec.jobKey, gate } });
    }),
    outcomeOfClosedGate: assign(({ context }) => ({ outcome: context.approval ? closedOutcome(context.approval) : null })),
    finish: compose<{ status: TerminalJobStatus }>(({ context, event, enqueue }, params) => {
      for (const armed of Object.values(context.deadlines)) {
        enqueue({ type: 'disarmDeadline', params: { id: armed.id, jobKey: context.spec.jobKey } });
      }
      const steps = params.status === 'success' ? context.steps : interruptSteps(context.steps);
      enqueue.assign({ deadlines: {}, waiting: null, steps, enteredAt: stamped(context.enteredAt, params.status, timeOf(context, event)) });
      if (context.concurrency && (context.holdsConcurrency || context.enteredAt['concurrency'] !== undefined)) {
        enqueue({ type: 'releaseConcurrency', params: { jobKey: context.spec.jobKey, key: context.concurrency.key } });
      }
      const { jobKey } = context.spec;
      const { outcome, result } = context;
      const reported = {
        ...(result?.outputs ? { outputs: result.outputs } : {}),
        ...(result?.initResult ? { initResult: result.initResult } : {}),
      };
      enqueue({ type: 'tellRun', params: { report: { type: 'job.finished', jobKey, status: params.status, reason: outcome, at: timeOf(context, event), ...reported } } });
    }),
    reportStarted: compose(({ context, event, enqueue }) => {
      enqueue({ type: 'tellRun', params: { report: { type: 'job.started', jobKey: context.spec.jobKey, at: timeOf(context, event) } } });
    }),
  },
});

/** The verdict on an `ack.holder` answer in `phase`; null for any other event, or with no ack deadline armed. */
function overdueVerdict(context: JobContext, event: Ev, phase: AckHoldPhase): AckVerdict | null {
  const due = context.deadlines.ack;
  return event.type === 'ack.holder' && due !== undefined ? ackVerdict(phase, event, due.at) : null;
}

type Enqueue = Parameters<Parameters<typeof compose>[0]>[0]['enqueue'];

/** Arms the job's deadline of `kind` for `at`: its entry in the context, and the intent that stores and fires it. */
function armIn(context: JobContext, enqueue: Enqueue, kind: Exclude<JobDeadlineKind, 'approval'>, at: number): void {
  const id = `${context.spec.jobKey}#${kind}`;
  enqueue.assign({ deadlines: { ...context.deadlines, [kind]: { id, at } } });
  enqueue({ type: 'armDeadline', params: { id, kind, at, jobKey: context.spec.jobKey } });
}

/**
 * Why a job waits for its group. A build job's group is the source it builds (machines/run.plan.ts
 * withBuild): another run is building it, and this one will find it built.
 */
function groupWaitMessage(key: string, position: string | null): string {
  const build = /::__build__.*::([0-9a-f]{12})[0-9a-f]*$/.exec(key);
  if (build) return `waiting for another run's build of the same workflow source (contentHash ${build[1]}…); it will be used, not built again`;
  return position === null ? `waiting for concurrency group ${key}: asked for a slot` : `waiting for concurrency group ${key} (${position})`;
}
