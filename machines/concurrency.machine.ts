import { assertEvent, enqueueActions, setup } from 'xstate';
import type { EventFrom, ParameterizedObject, SnapshotFrom } from 'xstate';
import type { ConcurrencyPolicy } from './types.ts';

export const CONCURRENCY_MACHINE_ID = 'concurrency';
/** Bump when a change makes stored group snapshots unreadable (docs/architecture.md#ownership-leases-epochs-fencing-and-adoption). */
export const CONCURRENCY_MACHINE_VERSION = 1;

/** Who asks for a group: a job (`jobKey` set) or a whole run (`jobKey` null), CONC-1. */
export interface GroupParty {
  /** Opaque and unique per holder; the host derives it from run id and job key. */
  holderId: string;
  runId: string;
  jobKey: string | null;
}

export interface GroupHolder extends GroupParty {
  since: number;
}

export interface GroupWaiter extends GroupParty {
  requestedAt: number;
  policy: ConcurrencyPolicy;
}

/** All of a group's state (CONC-3); it persists with the actor's snapshot. */
export interface ConcurrencyContext {
  key: string;
  holders: GroupHolder[];
  /** FIFO: the first waiter is granted first. */
  waiters: GroupWaiter[];
}

export interface ConcurrencyInput {
  key: string;
}

export type ConcurrencyEvent =
  | ({ type: 'concurrency.request'; policy: ConcurrencyPolicy; at: number } & GroupParty)
  | { type: 'concurrency.release'; holderId: string; at: number };

/** Intents the arbiter records; the host turns them into events to the parties' actors. */
export type ConcurrencyIntent =
  | { type: 'grant'; params: GroupParty }
  | { type: 'queued'; params: GroupParty & { position: number } }
  | { type: 'supersede'; params: GroupParty & { reason: string } };

type Ev = ConcurrencyEvent;
type Params = ParameterizedObject['params'] | undefined;

/** enqueueActions, typed to enqueue the arbiter's intents by name. */
function compose<P extends Params = undefined>(
  collect: Parameters<typeof enqueueActions<ConcurrencyContext, Ev, P, Ev, never, ConcurrencyIntent, never>>[0],
) {
  return enqueueActions<ConcurrencyContext, Ev, P, Ev, never, ConcurrencyIntent, never>(collect);
}

type Enqueue = Parameters<Parameters<typeof compose>[0]>[0]['enqueue'];

function partyOf({ holderId, runId, jobKey }: GroupParty): GroupParty {
  return { holderId, runId, jobKey };
}

/** A `max` below 1 would leave the group closed for ever; treat it as 1. */
function capacityOf(policy: ConcurrencyPolicy): number {
  return Math.max(1, policy.max);
}

function isHolder(context: ConcurrencyContext, holderId: string): boolean {
  return context.holders.some((holder) => holder.holderId === holderId);
}

function isWaiting(context: ConcurrencyContext, holderId: string): boolean {
  return context.waiters.some((waiter) => waiter.holderId === holderId);
}

/** Announces the new position of every waiter whose position changed (1 = next in line). */
function announceMoves(enqueue: Enqueue, before: readonly GroupWaiter[], after: readonly GroupWaiter[]): void {
  after.forEach((waiter, index) => {
    if (before.indexOf(waiter) !== index) enqueue({ type: 'queued', params: { ...partyOf(waiter), position: index + 1 } });
  });
}

/** Grants waiters from the head of the queue while the first one fits (CONC-6). */
function grantWaiters(enqueue: Enqueue, context: ConcurrencyContext, holders: GroupHolder[], at: number): GroupWaiter[] {
  const waiters = [...context.waiters];
  while (waiters[0] && holders.length < capacityOf(waiters[0].policy)) {
    const next = waiters.shift();
    if (!next) break;
    holders.push({ ...partyOf(next), since: at });
    enqueue({ type: 'grant', params: partyOf(next) });
  }
  return waiters;
}

const concurrencySetup = setup({
  types: {
    context: {} as ConcurrencyContext,
    events: {} as Ev,
    input: {} as ConcurrencyInput,
  },
  actions: {
    // Host-provided intents (docs/architecture.md#time-durable-deadlines). The defaults do nothing: machines perform no I/O.
    grant: (_, _params: GroupParty) => {},
    queued: (_, _params: GroupParty & { position: number }) => {},
    supersede: (_, _params: GroupParty & { reason: string }) => {},
  },
  guards: {
    fromHolder: ({ context, event }) => isHolder(context, event.holderId),
    fromWaiter: ({ context, event }) => isWaiting(context, event.holderId),
    cancelsInProgress: ({ event }) => event.type === 'concurrency.request' && event.policy.cancelInProgress,
    hasRoom: ({ context, event }) =>
      event.type === 'concurrency.request' &&
      context.waiters.length === 0 &&
      context.holders.length < capacityOf(event.policy),
  },
});

export const concurrencyMachine = concurrencySetup
  .extend({
    actions: {
      grantAgain: compose(({ context, event, enqueue }) => {
        const holder = context.holders.find((candidate) => candidate.holderId === event.holderId);
        if (holder) enqueue({ type: 'grant', params: partyOf(holder) });
      }),
      repeatPosition: compose(({ context, event, enqueue }) => {
        const index = context.waiters.findIndex((waiter) => waiter.holderId === event.holderId);
        const waiter = context.waiters[index];
        if (waiter) enqueue({ type: 'queued', params: { ...partyOf(waiter), position: index + 1 } });
      }),
      supersedeOthers: compose(({ context, event, enqueue }) => {
        assertEvent(event, 'concurrency.request');
        const reason = `superseded by run ${event.runId} in concurrency group ${context.key}`;
        for (const other of [...context.holders, ...context.waiters]) {
          enqueue({ type: 'supersede', params: { ...partyOf(other), reason } });
        }
        enqueue.assign({ holders: [], waiters: [] });
      }),
      grantRequest: compose(({ context, event, enqueue }) => {
        assertEvent(event, 'concurrency.request');
        enqueue.assign({ holders: [...context.holders, { ...partyOf(event), since: event.at }] });
        enqueue({ type: 'grant', params: partyOf(event) });
      }),
      queueRequest: compose(({ context, event, enqueue }) => {
        assertEvent(event, 'concurrency.request');
        const waiter: GroupWaiter = { ...partyOf(event), requestedAt: event.at, policy: event.policy };
        enqueue.assign({ waiters: [...context.waiters, waiter] });
        enqueue({ type: 'queued', params: { ...partyOf(event), position: context.waiters.length + 1 } });
      }),
      releaseHolder: compose(({ context, event, enqueue }) => {
        const holders = context.holders.filter((holder) => holder.holderId !== event.holderId);
        const waiters = grantWaiters(enqueue, context, holders, event.at);
        enqueue.assign({ holders, waiters });
        announceMoves(enqueue, context.waiters, waiters);
      }),
      leaveQueue: compose(({ context, event, enqueue }) => {
        const waiters = context.waiters.filter((waiter) => waiter.holderId !== event.holderId);
        enqueue.assign({ waiters });
        announceMoves(enqueue, context.waiters, waiters);
      }),
    },
  })
  .createMachine({
    id: CONCURRENCY_MACHINE_ID,
    context: ({ input }) => ({ key: input.key, holders: [], waiters: [] }),
    initial: 'arbitrating',
    states: {
      arbitrating: {
        description: 'Grants, queues and supersedes requests for one group key (CONC-3..6).',
        on: {
          'concurrency.request': [
            { guard: 'fromHolder', actions: 'grantAgain' },
            { guard: 'fromWaiter', actions: 'repeatPosition' },
            { guard: 'cancelsInProgress', actions: ['supersedeOthers', 'grantRequest'] },
            { guard: 'hasRoom', actions: 'grantRequest' },
            { actions: 'queueRequest' },
          ],
          // Releasing a party that already left changes nothing: a release may arrive twice.
          'concurrency.release': [
            { guard: 'fromHolder', actions: 'releaseHolder' },
            { guard: 'fromWaiter', actions: 'leaveQueue' },
          ],
        },
      },
    },
  });

export type ConcurrencyMachine = typeof concurrencyMachine;
export type ConcurrencySnapshot = SnapshotFrom<ConcurrencyMachine>;
export type ConcurrencyMachineEvent = EventFrom<ConcurrencyMachine>;
