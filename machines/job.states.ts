import { ACK_HOLD_PHASES, type AckHoldPhase } from './job.withdrawal.ts';

/**
 * Parts of the job chart (machines/job.machine.ts) kept here to keep that file readable: the
 * recovering states of an agent back without its attempt, the hold on an overdue ack, and the
 * withdrawal of an attempt whose ack never came (machines/job.withdrawal.ts). Each is plain chart
 * config, typed where the chart takes it.
 */

/**
 * An agent that registered again without its attempt has until the replay deadline (or the recovery
 * window, whichever comes first) to replay the attempt's status; then an attempt that had started
 * fails and one that had not is tried again, with words saying what happened.
 */
export function unlisted(started: boolean, description: string) {
  const lost = { target: started ? '#job.failed' : '#job.requeued', actions: { type: 'setLostOutcome', params: { started } } } as const;
  return {
    description,
    entry: { type: 'arm', params: { kind: 'replay' } },
    exit: { type: 'disarm', params: { kind: 'replay' } },
    on: {
      'agent.step.status': { guard: 'fromAssignedAgent', actions: 'recordStep' },
      'timer.replay.expired': { guard: { type: 'isCurrentDeadline', params: { kind: 'replay' } }, ...lost },
      'timer.recovery.expired': { guard: { type: 'isCurrentDeadline', params: { kind: 'recovery' } }, ...lost },
    },
  } as const;
}

/**
 * One phase of the hold on an overdue ack (machines/job.withdrawal.ts): ask where the agent's socket
 * is, then withdraw the attempt, hear the agent as lost, or wait (a durable deadline) and ask again,
 * in the phase the verdict names.
 */
export function ackOverdue(phase: AckHoldPhase) {
  const waitIn = (next: AckHoldPhase) => ({
    guard: { type: 'ackVerdictIs', params: { phase, is: next } },
    target: `#job.assigned.dispatched.ackOverdue.${next}.waiting`,
    actions: { type: 'armAckRecheck', params: { phase } },
  }) as const;
  return {
    initial: 'asking',
    states: {
      asking: {
        entry: 'askWhereAgentIs',
        on: {
          'ack.holder': [
            { guard: { type: 'ackVerdictIs', params: { phase, is: 'deliver' } }, target: '#job.withdrawing' },
            { guard: { type: 'ackVerdictIs', params: { phase, is: 'lost' } }, actions: { type: 'raiseAgentLost', params: { phase } } },
            ...ACK_HOLD_PHASES.map(waitIn),
          ],
        },
      },
      waiting: {
        on: { 'timer.recheck.expired': { guard: { type: 'isCurrentDeadline', params: { kind: 'recheck' } }, target: 'asking' } },
      },
    },
  } as const;
}

/** The withdrawal of an attempt whose ack never came (its description says what it does). */
export const withdrawing = {
  description:
    'The ack deadline passed and the attempt is withdrawn: cancelled on its agent, which may still run it, and its socket closed. The job is placed again once the cancel has gone out (or, with no socket of the agent anywhere, once the agent is back), or when the hold ends (B7).',
  tags: ['status:queued'],
  entry: [
    'openWithdrawal',
    { type: 'cancelOnAgent', params: { force: true, reason: 'dispatch ack timeout', report: true } },
    'closeForAckTimeout',
    { type: 'freeSlot', params: { after: true } },
    { type: 'setOutcome', params: { outcome: 'dispatch ack timeout' } },
    'clearAssignment',
  ],
  exit: [{ type: 'disarm', params: { kind: 'recheck' } }, { type: 'disarm', params: { kind: 'fence' } }, 'closeWithdrawal'],
  initial: 'cancelling',
  on: {
    'job.cancel.requested': { target: 'cancelled', actions: 'outcomeFromEvent' },
    'placement.granted': { actions: 'releaseStaleGrant' },
    'timer.fence.expired': { guard: { type: 'isCurrentDeadline', params: { kind: 'fence' } }, target: 'requeued' },
  },
  states: {
    cancelling: {
      description: "The cancel is on its way: sent on a socket here, the job goes on; left with a peer, or with no socket anywhere, it is fenced.",
      on: {
        'cancel.reported': [
          { guard: 'cancelWentOut', target: '#job.requeued' },
          { guard: 'reportsWithdrawnCancel', target: 'fenced', actions: 'raiseFence' },
        ],
      },
    },
    fenced: {
      initial: 'waiting',
      states: {
        waiting: {
          entry: 'armFencePoll',
          on: { 'timer.recheck.expired': { guard: { type: 'isCurrentDeadline', params: { kind: 'recheck' } }, target: 'asking' } },
        },
        asking: {
          entry: 'askWhetherCancelWentOut',
          on: {
            'fence.checked': [{ guard: 'fenceLifted', target: '#job.requeued' }, { target: 'waiting' }],
          },
        },
      },
    },
  },
} as const;
