import assert from 'node:assert/strict';
import { it } from 'node:test';
import { pino } from 'pino';
import { systemClock } from '../../../actors/clock.ts';
import { RunNotOwnedError } from '../../../actors/runs/errors.ts';
import { EventRouter, type InboxStore } from '../../../actors/runs/event-router.ts';
import type { IncomingRunEvent, Supervisor } from '../../../actors/runs/supervisor.ts';

const event = { type: 'agent.job.status', jobKey: 'build', agentId: 'agent-1', dispatchId: 'd-1', state: 'success', at: 1 } as unknown as IncomingRunEvent;

it('B5: an inbox event read while its run is being adopted here waits for the run’s actor; it is not dropped as undeliverable', async () => {
  const world = { adopting: false, restored: false };
  const rows = [{ id: 1, runId: 'run-a', event: event as unknown }];
  let peeked!: () => void;
  const peekGate = new Promise<void>((resolve) => (peeked = resolve));
  const delivered: string[] = [];
  const undeliverable: string[] = [];
  const inbox: InboxStore = {
    enqueue: () => Promise.resolve(true),
    // The first peek answers only after the adoption has moved the run here (its owner row says so).
    peek: async () => {
      await peekGate;
      return rows.slice();
    },
    remove: (ids) => {
      for (const id of ids) rows.splice(rows.findIndex((row) => row.id === id), 1);
      return Promise.resolve();
    },
  };
  const supervisor = {
    owns: (runId: string) => world.restored && runId === 'run-a',
    send: (runId: string) => {
      if (!world.restored) return Promise.reject(new RunNotOwnedError(runId));
      delivered.push(runId);
      return Promise.resolve();
    },
  } as unknown as Supervisor;
  const router = new EventRouter({
    ...{ supervisor, inbox, clock: systemClock, log: pino({ level: 'silent' }), pollMs: 60_000 },
    onUndeliverable: (runId) => undeliverable.push(runId),
    canDrain: () => !world.adopting,
  });
  const draining = router.drain();
  world.adopting = true; // the adoption starts while the peek is in flight, and moves the run here
  peeked();
  assert.equal(await draining, 0);
  assert.deepEqual(undeliverable, [], 'the event was not given up');
  assert.equal(rows.length, 1, 'the event stays in the inbox');
  world.restored = true;
  world.adopting = false; // the actor exists: the drain after the adoption delivers it
  assert.equal(await router.drain(), 1);
  assert.deepEqual(delivered, ['run-a']);
  assert.equal(rows.length, 0);
});

it('a drain applies every event of its batch, in inbox order, before any of their commits settles; an event whose commit failed stays in the inbox', async () => {
  const rows = [1, 2, 3, 4].map((id) => ({ id, runId: id === 3 ? 'run-a' : `run-${id}`, event: { ...event, at: id } }));
  const applied: number[] = [];
  const commits: { id: number; settle: (ok: boolean) => void }[] = [];
  const inbox: InboxStore = {
    enqueue: () => Promise.resolve(true),
    peek: () => Promise.resolve(rows.slice()),
    remove: (ids) => {
      for (const id of ids) rows.splice(rows.findIndex((row) => row.id === id), 1);
      return Promise.resolve();
    },
  };
  const supervisor = {
    owns: () => true,
    // As the supervisor's send: the event is applied at once, then its commit is awaited.
    send: (_runId: string, incoming: IncomingRunEvent) => {
      const id = incoming.at as number;
      applied.push(id);
      return new Promise<void>((resolve, reject) => commits.push({ id, settle: (ok) => (ok ? resolve() : reject(new Error('commit failed'))) }));
    },
  } as unknown as Supervisor;
  const router = new EventRouter({ supervisor, inbox, clock: systemClock, log: pino({ level: 'silent' }), pollMs: 60_000 });
  const draining = router.drain();
  await new Promise((resolve) => setImmediate(resolve));
  assert.deepEqual(applied, [1, 2, 3, 4], 'all four applied while no commit has settled yet');
  for (const commit of commits) commit.settle(commit.id !== 2);
  await assert.rejects(draining, /commit failed/);
  assert.deepEqual(rows.map((row) => row.id), [2], 'the delivered events are removed; the failed one is read again by the next drain');
});
