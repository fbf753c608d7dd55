import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createActor, initialTransition, transition } from 'xstate';
import type { Snapshot } from 'xstate';
import { concurrencyMachine } from '../../../machines/concurrency.machine.ts';
import type { ConcurrencyEvent, ConcurrencyIntent, ConcurrencySnapshot } from '../../../machines/concurrency.machine.ts';
import type { ConcurrencyPolicy } from '../../../machines/types.ts';

const KEY = 'acme/app::deploy';
const FIFO_ONE: ConcurrencyPolicy = { cancelInProgress: false, max: 1 };
const FIFO_TWO: ConcurrencyPolicy = { cancelInProgress: false, max: 2 };
const CANCEL: ConcurrencyPolicy = { cancelInProgress: true, max: 1 };
const INTENT_TYPES = new Set<string>(['grant', 'queued', 'supersede']);

type Intent = { type: ConcurrencyIntent['type']; params: ConcurrencyIntent['params'] };

/** Party `n`: holder `h<n>`, job `deploy` of run `r<n>`. */
const party = (n: number) => ({ holderId: `h${n}`, runId: `r${n}`, jobKey: 'deploy' });

function request(n: number, policy: ConcurrencyPolicy, at = n * 10): ConcurrencyEvent {
  return { type: 'concurrency.request', ...party(n), policy, at };
}

function release(n: number, at: number): ConcurrencyEvent {
  return { type: 'concurrency.release', holderId: `h${n}`, at };
}

const grant = (n: number): Intent => ({ type: 'grant', params: party(n) });
const queued = (n: number, position: number): Intent => ({ type: 'queued', params: { ...party(n), position } });
const supersede = (n: number, byRun: string): Intent => ({
  type: 'supersede',
  params: { ...party(n), reason: `superseded by run ${byRun} in concurrency group ${KEY}` },
});

function start(): ConcurrencySnapshot {
  const [snapshot, actions] = initialTransition(concurrencyMachine, { key: KEY });
  assert.deepEqual(intentsOf(actions), []);
  return snapshot;
}

function intentsOf(actions: readonly { type: string; params?: unknown }[]): Intent[] {
  return actions.filter((action) => INTENT_TYPES.has(action.type)).map((action) => ({ type: action.type, params: action.params }) as Intent);
}

function step(snapshot: ConcurrencySnapshot, event: ConcurrencyEvent): [ConcurrencySnapshot, Intent[]] {
  const [next, actions] = transition(concurrencyMachine, snapshot, event);
  assert.equal(next.value, 'arbitrating');
  return [next, intentsOf(actions)];
}

/** Feeds events in order; returns the last snapshot and the intents of every step. */
function play(snapshot: ConcurrencySnapshot, events: ConcurrencyEvent[]): [ConcurrencySnapshot, Intent[][]] {
  const all: Intent[][] = [];
  let current = snapshot;
  for (const event of events) {
    const [next, intents] = step(current, event);
    all.push(intents);
    current = next;
  }
  return [current, all];
}

const holderIds = (snapshot: ConcurrencySnapshot) => snapshot.context.holders.map((holder) => holder.holderId);
const waiterIds = (snapshot: ConcurrencySnapshot) => snapshot.context.waiters.map((waiter) => waiter.holderId);

describe('concurrency group arbiter', () => {
  it('starts empty for its key', () => {
    const snapshot = start();
    assert.equal(snapshot.value, 'arbitrating');
    assert.deepEqual(snapshot.context, { key: KEY, holders: [], waiters: [] });
  });

  it('grants in FIFO order with max 1', () => {
    const [afterQueue, queueing] = play(start(), [request(1, FIFO_ONE), request(2, FIFO_ONE), request(3, FIFO_ONE)]);
    assert.deepEqual(queueing, [[grant(1)], [queued(2, 1)], [queued(3, 2)]]);
    assert.deepEqual(afterQueue.context.waiters[1], { ...party(3), requestedAt: 30, policy: FIFO_ONE });

    const [afterFirst, firstRelease] = step(afterQueue, release(1, 100));
    assert.deepEqual(firstRelease, [grant(2), queued(3, 1)]);
    assert.deepEqual(afterFirst.context.holders, [{ ...party(2), since: 100 }]);
    assert.deepEqual(waiterIds(afterFirst), ['h3']);

    const [afterSecond, secondRelease] = step(afterFirst, release(2, 200));
    assert.deepEqual(secondRelease, [grant(3)]);
    assert.deepEqual(holderIds(afterSecond), ['h3']);
    assert.deepEqual(waiterIds(afterSecond), []);
  });

  it('grants in FIFO order with max 2', () => {
    const [full, intents] = play(start(), [request(1, FIFO_TWO), request(2, FIFO_TWO), request(3, FIFO_TWO), request(4, FIFO_TWO)]);
    assert.deepEqual(intents, [[grant(1)], [grant(2)], [queued(3, 1)], [queued(4, 2)]]);
    assert.deepEqual(holderIds(full), ['h1', 'h2']);

    const [afterSecond, releaseSecond] = step(full, release(2, 100));
    assert.deepEqual(releaseSecond, [grant(3), queued(4, 1)]);
    assert.deepEqual(holderIds(afterSecond), ['h1', 'h3']);

    const [afterFirst, releaseFirst] = step(afterSecond, release(1, 110));
    assert.deepEqual(releaseFirst, [grant(4)]);
    assert.deepEqual(holderIds(afterFirst), ['h3', 'h4']);
  });

  it('queues a new request behind existing waiters even when a holder slot looks free', () => {
    const [snapshot, intents] = play(start(), [request(1, FIFO_ONE), request(2, FIFO_ONE), request(3, FIFO_TWO)]);
    assert.deepEqual(intents, [[grant(1)], [queued(2, 1)], [queued(3, 2)]]);
    assert.deepEqual(waiterIds(snapshot), ['h2', 'h3']);
  });

  it('cancelInProgress supersedes every holder and every older waiter, then grants at once', () => {
    const [busy] = play(start(), [request(1, FIFO_TWO), request(2, FIFO_TWO), request(3, FIFO_TWO)]);
    const [snapshot, intents] = step(busy, request(4, CANCEL, 50));
    assert.deepEqual(intents, [supersede(1, 'r4'), supersede(2, 'r4'), supersede(3, 'r4'), grant(4)]);
    assert.deepEqual(snapshot.context.holders, [{ ...party(4), since: 50 }]);
    assert.deepEqual(snapshot.context.waiters, []);
  });

  it('cancelInProgress with max 1 replaces the single holder', () => {
    const [snapshot, intents] = play(start(), [request(1, CANCEL), request(2, CANCEL)]);
    assert.deepEqual(intents, [[grant(1)], [supersede(1, 'r2'), grant(2)]]);
    assert.deepEqual(holderIds(snapshot), ['h2']);
  });

  it('ignores the late release of a superseded holder', () => {
    const [snapshot] = play(start(), [request(1, CANCEL), request(2, CANCEL)]);
    const [after, intents] = step(snapshot, release(1, 99));
    assert.deepEqual(intents, []);
    assert.deepEqual(after.context, snapshot.context);
  });

  it('lets a waiter leave the queue and re-announces only the positions that moved', () => {
    const [queue] = play(start(), [request(1, FIFO_ONE), request(2, FIFO_ONE), request(3, FIFO_ONE), request(4, FIFO_ONE)]);
    const [left, leaving] = step(queue, release(3, 60));
    assert.deepEqual(leaving, [queued(4, 2)]);
    assert.deepEqual(holderIds(left), ['h1']);
    assert.deepEqual(waiterIds(left), ['h2', 'h4']);

    const [afterHolder, holderLeaving] = step(left, release(1, 70));
    assert.deepEqual(holderLeaving, [grant(2), queued(4, 1)]);
    assert.deepEqual(waiterIds(afterHolder), ['h4']);
  });

  it('treats a repeated release as a no-op', () => {
    const [held] = play(start(), [request(1, FIFO_ONE), request(2, FIFO_ONE)]);
    const [once, first] = step(held, release(1, 100));
    assert.deepEqual(first, [grant(2)]);
    const [twice, second] = step(once, release(1, 101));
    assert.deepEqual(second, []);
    assert.deepEqual(twice.context, once.context);
    const [unknown, none] = step(twice, release(9, 102));
    assert.deepEqual(none, []);
    assert.deepEqual(unknown.context, once.context);
  });

  it('answers a repeated request with the same grant or position and changes nothing', () => {
    const [snapshot] = play(start(), [request(1, FIFO_ONE), request(2, FIFO_ONE)]);
    const [afterHolder, holderAgain] = step(snapshot, request(1, CANCEL, 500));
    assert.deepEqual(holderAgain, [grant(1)]);
    assert.deepEqual(afterHolder.context, snapshot.context);
    const [afterWaiter, waiterAgain] = step(afterHolder, request(2, CANCEL, 501));
    assert.deepEqual(waiterAgain, [queued(2, 1)]);
    assert.deepEqual(afterWaiter.context, snapshot.context);
  });

  it('holds a whole run when jobKey is null', () => {
    const runRequest: ConcurrencyEvent = { type: 'concurrency.request', holderId: 'r7', runId: 'r7', jobKey: null, policy: FIFO_ONE, at: 5 };
    const [snapshot, intents] = step(start(), runRequest);
    assert.deepEqual(intents, [{ type: 'grant', params: { holderId: 'r7', runId: 'r7', jobKey: null } }]);
    assert.deepEqual(snapshot.context.holders, [{ holderId: 'r7', runId: 'r7', jobKey: null, since: 5 }]);
  });

  it('treats max below 1 as 1 so the group never closes for ever', () => {
    const zero: ConcurrencyPolicy = { cancelInProgress: false, max: 0 };
    const [, intents] = play(start(), [request(1, zero), request(2, zero), release(1, 100)]);
    assert.deepEqual(intents, [[grant(1)], [queued(2, 1)], [grant(2)]]);
  });

  it('keeps holders and the queue across a persisted snapshot round trip', () => {
    const [queue] = play(start(), [request(1, FIFO_ONE), request(2, FIFO_ONE), request(3, FIFO_ONE)]);
    const stored = JSON.parse(JSON.stringify(concurrencyMachine.getPersistedSnapshot(queue))) as Snapshot<unknown>;
    const restored = createActor(concurrencyMachine, { snapshot: stored, input: { key: 'ignored when restoring' } }).getSnapshot();
    assert.equal(restored.value, 'arbitrating');
    assert.deepEqual(restored.context, queue.context);

    const [after, intents] = step(restored, release(1, 100));
    assert.deepEqual(intents, [grant(2), queued(3, 1)]);
    assert.deepEqual(holderIds(after), ['h2']);
    assert.deepEqual(waiterIds(after), ['h3']);
  });
});
