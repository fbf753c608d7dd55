import { sendParent } from 'xstate';
import type { EventFrom, SnapshotFrom } from 'xstate';
import type { JobReport } from './job.events.ts';
import { endAsReported, jobSetup } from './job.setup.ts';
import { ackOverdue, unlisted, withdrawing } from './job.states.ts';

export const JOB_MACHINE_ID = 'job';
/** Bump when a change makes stored job snapshots unreadable (docs/architecture.md#ownership-leases-epochs-fencing-and-adoption). */
export const JOB_MACHINE_VERSION = 5;

/**
 * The dispatch lifecycle of one job (docs/architecture.md#one-delivery-from-webhook-to-finished-run). Deadlines are armed and disarmed
 * by name and arrive as `timer.*.expired` events; a firing that is not the armed one is ignored.
 */
export const jobMachine = jobSetup.createMachine({
  id: JOB_MACHINE_ID,
  context: ({ input }) => ({
    spec: {
      runId: input.runId,
      jobKey: input.jobKey,
      baseName: input.baseName,
      matrix: input.matrix ?? null,
      createdAt: input.createdAt,
      requirements: input.requirements,
      timeouts: input.timeouts,
      maxAttempts: input.maxAttempts,
      initFor: input.initFor ?? null,
    },
    concurrency: input.concurrency,
    holdsConcurrency: false,
    upstream: null,
    resolved: null,
    hold: input.hold ?? null,
    approval: null,
    steps: [],
    result: null,
    attempt: 0,
    assignment: null,
    waiting: input.gate,
    lastProvisioningError: null,
    deadlines: {},
    initFailure: input.initFailure,
    outcome: input.initFailure?.message ?? null,
    enteredAt: { pending: input.createdAt },
    withdrawal: null,
  }),
  initial: 'created',
  states: {
    created: {
      always: [
        { guard: 'hasInitFailure', target: 'failed' },
        { guard: 'isGated', target: 'waiting.gated' },
        { target: 'admitted' },
      ],
    },
    waiting: {
      description: 'Not dispatchable yet; `context.waiting` names the reason (G-5).',
      tags: ['status:pending'],
      initial: 'gated',
      on: {
        'job.skip': { target: 'skipped', actions: 'outcomeFromEvent' },
        'job.cancel.requested': { target: 'cancelled', actions: 'outcomeFromEvent' },
        'job.init.failed': { target: 'failed', actions: 'failInit' },
        'placement.granted': { actions: 'releaseStaleGrant' },
      },
      states: {
        gated: {
          description: 'Held by the run: upstream needs, its init job, a wave window or an approval.',
          on: {
            'job.release': { target: '#job.admitted', actions: 'takeRelease' },
            'job.gate': { actions: 'wait' },
          },
        },
        approval: {
          description: 'Held until a user approves its environment (ENV-2); rejection or the approval deadline cancels it.',
          entry: 'openApprovalGate',
          exit: ['closeApprovalGate', { type: 'disarm', params: { kind: 'approval' } }],
          on: {
            'job.approval': [
              { guard: 'approves', target: '#job.admitted' },
              { guard: 'rejects', target: '#job.cancelled', actions: 'outcomeOfClosedGate' },
            ],
            'timer.approval.expired': {
              guard: { type: 'isCurrentDeadline', params: { kind: 'approval' } },
              target: '#job.cancelled',
              actions: 'outcomeOfClosedGate',
            },
          },
        },
        concurrency: {
          entry: [{ type: 'enter', params: { status: 'concurrency' } }, 'awaitConcurrency', 'askForConcurrency'],
          on: {
            'concurrency.granted': { target: '#job.admitted', actions: 'holdConcurrency' },
            'concurrency.queued': { actions: 'wait' },
          },
        },
        agent: {
          description: 'Eligible, but no agent can take it yet; the queue deadline keeps running.',
          tags: ['waits-for-agent'],
          on: {
            'placement.granted': { target: '#job.assigned.dispatched', actions: 'startAttempt' },
            'placement.none': { actions: 'wait' },
            'job.restored': { actions: { type: 'askForPlacement', params: { again: true } } },
            'placement.refused': { target: '#job.failed', actions: { type: 'failNoAgent', params: { message: 'queue full' } } },
            'provision.failed': [
              { guard: 'attemptsLeftAfterThis', actions: 'noteProvisioningFailure' },
              { target: '#job.failed', actions: ['noteProvisioningFailure', 'setOutcomeExhausted'] },
            ],
            'timer.queue.expired': { guard: { type: 'isCurrentDeadline', params: { kind: 'queue' } }, target: '#job.queueExpired' },
          },
        },
      },
    },
    admitted: {
      always: [
        { guard: 'awaitsApproval', target: 'waiting.approval' },
        { guard: 'needsConcurrency', target: 'waiting.concurrency' },
        { guard: 'queueExpires', target: 'queued', actions: { type: 'arm', params: { kind: 'queue' } } },
        { target: 'queued' },
      ],
    },
    queued: {
      tags: ['status:queued', 'waits-for-agent'],
      entry: [{ type: 'enter', params: { status: 'queued' } }, 'askForPlacement'],
      on: {
        'placement.granted': { target: 'assigned.dispatched', actions: 'startAttempt' },
        'placement.none': { target: 'waiting.agent', actions: 'wait' },
        'job.restored': { actions: 'askForPlacement' },
        'placement.refused': { target: 'failed', actions: { type: 'failNoAgent', params: { message: 'queue full' } } },
        'timer.queue.expired': { guard: { type: 'isCurrentDeadline', params: { kind: 'queue' } }, target: 'queueExpired' },
        'job.skip': { target: 'skipped', actions: 'outcomeFromEvent' },
        'job.cancel.requested': { target: 'cancelled', actions: 'outcomeFromEvent' },
      },
    },
    queueExpired: {
      always: [
        { guard: 'everDispatched', target: 'timed_out_stale', actions: 'setOutcomeQueueExpired' },
        { target: 'failed', actions: 'failQueueExpired' },
      ],
    },
    assigned: {
      description: 'An agent slot is reserved for the current attempt; leaving frees it.',
      tags: ['holds-slot'],
      exit: 'freeSlot',
      initial: 'dispatched',
      on: {
        'agent.job.status': endAsReported,
        'agent.step.status': { guard: 'fromAssignedAgent', actions: 'recordStep' },
        'placement.granted': { actions: 'releaseStaleGrant' },
        'agent.job.lost': { guard: 'fromAssignedAgent', target: '#job.recovering.unlistedBeforeStart' },
      },
      states: {
        dispatched: {
          description: 'job.dispatch sent; waiting for job.ack (ack deadline).',
          tags: ['status:queued'],
          entry: [
            { type: 'enter', params: { status: 'dispatched' } },
            { type: 'disarm', params: { kind: 'queue' } },
            { type: 'arm', params: { kind: 'ack' } },
            'dispatch',
          ],
          exit: [
            { type: 'disarm', params: { kind: 'ack' } },
            { type: 'disarm', params: { kind: 'recheck' } },
          ],
          initial: 'awaitingAck',
          states: {
            awaitingAck: {
              on: { 'timer.ack.expired': { guard: { type: 'isCurrentDeadline', params: { kind: 'ack' } }, target: 'ackOverdue' } },
            },
            ackOverdue: {
              description:
                "The ack deadline passed. Where the agent's socket is decides (machines/job.withdrawal.ts): here, withdraw the attempt; on a peer that stopped renewing its lease, hold until it renews or lapses; nowhere, wait for the agent's reclaim (B7). The agent's ack is still taken meanwhile.",
              initial: 'unheld',
              states: { unheld: ackOverdue('unheld'), held: ackOverdue('held'), settling: ackOverdue('settling') },
            },
          },
          on: {
            'agent.job.ack': { guard: 'fromAssignedAgent', target: 'running.accepted' },
            'agent.job.reclaim': { guard: 'fromAssignedAgent', target: 'running.accepted', actions: 'recordReclaim' },
            'agent.job.status': { guard: { type: 'assignedReports', params: { state: 'running' } }, target: 'running.started' },
            'agent.job.reject': { guard: 'fromAssignedAgent', target: '#job.requeued', actions: { type: 'setOutcome', params: { outcome: 'rejected by agent' } } },
            'agent.disconnected': [
              { guard: 'lostScalerAgent', target: '#job.requeued', actions: { type: 'setOutcome', params: { outcome: 'scaler agent lost before start' } } },
              { guard: 'assignedAgentLost', target: '#job.recovering.beforeStart' },
            ],
            // Even a scaler agent may be alive and reconnecting: it gets the recovery window too.
            'job.restored': { guard: 'assignedAgentGone', target: '#job.recovering.beforeStart' },
            'job.cancel.requested': {
              target: '#job.cancelled',
              actions: [{ type: 'cancelOnAgent', params: { force: true, reason: 'cancelled' } }, 'outcomeFromEvent'],
            },
          },
        },
        running: {
          tags: ['status:running'],
          entry: [{ type: 'enter', params: { status: 'running' } }, { type: 'arm', params: { kind: 'lease' } }],
          exit: { type: 'disarm', params: { kind: 'lease' } },
          initial: 'accepted',
          on: {
            'agent.job.heartbeat': { guard: 'fromAssignedAgent', actions: { type: 'arm', params: { kind: 'lease' } } },
            'agent.step.status': { guard: 'fromAssignedAgent', actions: ['recordStep', { type: 'arm', params: { kind: 'lease' } }] },
            'agent.job.reclaim': { guard: 'fromAssignedAgent', actions: ['recordReclaim', { type: 'arm', params: { kind: 'lease' } }] },
            'agent.job.status': [
              { guard: { type: 'assignedReports', params: { state: 'cancelling' } }, target: 'cancelling' },
              { guard: 'assignedReportsProgress', actions: { type: 'arm', params: { kind: 'lease' } } },
            ],
            'timer.lease.expired': {
              guard: { type: 'isCurrentDeadline', params: { kind: 'lease' } },
              target: '#job.timed_out_stale',
              actions: [
                { type: 'cancelOnAgent', params: { force: true, reason: 'stale' } },
                { type: 'setOutcome', params: { outcome: 'no heartbeat within the job lease' } },
              ],
            },
            'agent.disconnected': [
              { guard: 'lostScalerAgent', target: '#job.requeued', actions: { type: 'setOutcome', params: { outcome: 'scaler agent lost before start' } } },
              { guard: 'assignedAgentLost', target: '#job.recovering.beforeStart' },
            ],
            'job.restored': { guard: 'assignedAgentGone', target: '#job.recovering.beforeStart' },
            'job.cancel.requested': [
              {
                guard: 'isForced',
                target: '#job.cancelled',
                actions: [{ type: 'cancelOnAgent', params: { force: true, reason: 'cancelled' } }, 'outcomeFromEvent'],
              },
              { target: 'cancelling', actions: ['cancelGracefully', 'outcomeFromEvent'] },
            ],
          },
          states: {
            accepted: {
              description: 'Acked; the agent is cloning and setting up.',
              on: {
                'agent.job.status': {
                  guard: { type: 'assignedReports', params: { state: 'running' } },
                  target: 'started',
                  actions: { type: 'arm', params: { kind: 'lease' } },
                },
              },
            },
            started: {
              description: 'The agent reported running; from here a lost attempt or a lost scaler agent fails the job.',
              entry: ['reportStarted', 'armJobTimeoutBackstop'],
              on: {
                'agent.disconnected': [
                  { guard: 'lostScalerAgent', target: '#job.failed', actions: { type: 'setOutcome', params: { outcome: 'scaler agent lost mid-execution' } } },
                  { guard: 'assignedAgentLost', target: '#job.recovering.afterStart' },
                ],
                'job.restored': { guard: 'assignedAgentGone', target: '#job.recovering.afterStart' },
                'agent.job.lost': { guard: 'fromAssignedAgent', target: '#job.recovering.unlistedAfterStart' },
                'timer.jobTimeout.expired': {
                  guard: { type: 'isCurrentDeadline', params: { kind: 'jobTimeout' } },
                  target: '#job.failed',
                  actions: [
                    { type: 'cancelOnAgent', params: { force: true, reason: 'job_timeout' } },
                    { type: 'setOutcome', params: { outcome: 'job_timeout' } },
                  ],
                },
              },
            },
          },
        },
        cancelling: {
          tags: ['status:cancelling'],
          entry: [{ type: 'enter', params: { status: 'cancelling' } }, { type: 'arm', params: { kind: 'cancel' } }],
          exit: { type: 'disarm', params: { kind: 'cancel' } },
          on: {
            'timer.cancel.expired': {
              guard: { type: 'isCurrentDeadline', params: { kind: 'cancel' } },
              target: '#job.cancelled',
              actions: { type: 'cancelOnAgent', params: { force: true, reason: 'cancel grace period expired' } },
            },
            'job.cancel.requested': {
              guard: 'isForced',
              target: '#job.cancelled',
              actions: { type: 'cancelOnAgent', params: { force: true, reason: 'cancelled' } },
            },
            'agent.disconnected': { guard: 'assignedAgentLost', target: '#job.cancelled' },
            'job.restored': { guard: 'assignedAgentGone', target: '#job.cancelled' },
            'agent.job.lost': { guard: 'fromAssignedAgent', target: '#job.cancelled' },
          },
        },
      },
    },
    recovering: {
      description: 'Its agent disconnected, or its coordinator restarted: the agent may reclaim the attempt within the recovery window.',
      tags: ['status:recovering', 'awaits-reclaim'],
      entry: [{ type: 'enter', params: { status: 'recovering' } }, 'noteRecovery', { type: 'arm', params: { kind: 'recovery' } }],
      exit: { type: 'disarm', params: { kind: 'recovery' } },
      initial: 'beforeStart',
      on: {
        'agent.job.status': endAsReported,
        'placement.granted': { actions: 'releaseStaleGrant' },
        'timer.recovery.expired': {
          guard: { type: 'isCurrentDeadline', params: { kind: 'recovery' } },
          target: 'failed',
          actions: { type: 'setOutcome', params: { outcome: 'agent did not reconnect within the recovery window' } },
        },
        'job.cancel.requested': { target: 'cancelled', actions: 'outcomeFromEvent' },
        'job.restored': { actions: 'noteRestart' },
      },
      states: {
        beforeStart: {
          description: 'The agent had not reported running: a lost attempt is tried again.',
          on: {
            'agent.job.reclaim': { guard: 'fromAssignedAgent', target: '#job.assigned.running.accepted', actions: 'recordReclaim' },
            'agent.job.lost': { guard: 'fromAssignedAgent', target: 'unlistedBeforeStart' },
          },
        },
        afterStart: {
          description: 'The agent had reported running: a reclaim resumes it started, a lost attempt fails the job.',
          on: {
            'agent.job.reclaim': { guard: 'fromAssignedAgent', target: '#job.assigned.running.started', actions: 'recordReclaim' },
            'agent.job.lost': { guard: 'fromAssignedAgent', target: 'unlistedAfterStart' },
          },
        },
        unlistedBeforeStart: unlisted(
          false,
          'The agent registered again without the attempt, which had not started. It may replay what it kept while disconnected (the stock agent does, after register.ack); nothing by the replay deadline, and the job is tried again.',
        ),
        unlistedAfterStart: unlisted(
          true,
          'The agent registered again without the attempt, which had started: it may have finished while disconnected, and its replayed status ends the job as reported. Nothing by the replay deadline, and the job fails.',
        ),
      },
    },
    withdrawing,
    requeued: {
      description: 'Transient: the attempt is over; try again or give up after the last attempt.',
      entry: 'clearAssignment',
      always: [
        { guard: 'attemptsLeft', target: 'requeueing' },
        { target: 'failed', actions: 'setOutcomeExhausted' },
      ],
    },
    requeueing: {
      always: [
        { guard: 'queueExpires', target: 'queued', actions: { type: 'arm', params: { kind: 'queue' } } },
        { target: 'queued' },
      ],
    },
    success: { type: 'final', tags: ['status:success'], entry: { type: 'finish', params: { status: 'success' } } },
    failed: { type: 'final', tags: ['status:failed'], entry: { type: 'finish', params: { status: 'failed' } } },
    cancelled: { type: 'final', tags: ['status:cancelled'], entry: { type: 'finish', params: { status: 'cancelled' } } },
    skipped: { type: 'final', tags: ['status:skipped'], entry: { type: 'finish', params: { status: 'skipped' } } },
    timed_out_stale: { type: 'final', tags: ['status:timed_out_stale'], entry: { type: 'finish', params: { status: 'timed_out_stale' } } },
    drift_dropped: { type: 'final', tags: ['status:drift_dropped'], entry: { type: 'finish', params: { status: 'drift_dropped' } } },
  },
});

/** The job chart as a run spawns it: what it tells its run goes to its parent. */
export const jobMachineOfRun = jobMachine.provide({
  actions: { tellRun: sendParent((_args, params: { report: JobReport }) => params.report) },
});

export type JobMachine = typeof jobMachine;
export type JobSnapshot = SnapshotFrom<JobMachine>;
export type JobMachineEvent = EventFrom<JobMachine>;
