import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import v8 from 'node:v8';
import vm from 'node:vm';
import { createActor, fromTransition, setup } from 'xstate';
import { assign } from '../../../machines/assign.ts';
import { RunHarness, jobPlan, startedJob } from '../../support/machines.ts';

// V8's own verdict on an object's layout; the flag only allows the %-syntax in functions compiled after it.
v8.setFlagsFromString('--allow-natives-syntax');
const hasFastProperties = vm.runInThisContext('(object) => %HasFastProperties(object)') as (object: object) => boolean;

describe('contexts a live run keeps stay compact (machines/assign.ts)', () => {
  it('a job context after several assigns keeps fast properties, not a 1.6 KB dictionary', () => {
    const job = startedJob();
    assert.ok(Object.keys(job.context).length > 20, 'the job context is past the size at which Object.assign makes a dictionary');
    assert.equal(hasFastProperties(job.context), true);
  });

  it('a run context after its jobs moved on keeps fast properties too', () => {
    const h = RunHarness.start([jobPlan('build'), jobPlan('test')]);
    h.dispatch('build', 2_000);
    const run = h.snapshot;
    assert.ok(Object.keys(run.context).length > 20);
    assert.equal(hasFastProperties(run.context), true);
    assert.equal(hasFastProperties(h.child('build').context), true);
  });
});

const haveSameMap = vm.runInThisContext('(a, b) => %HaveSameMap(a, b)') as (a: object, b: object) => boolean;

describe('objects every live run keeps share their hidden class', () => {
  it("two jobs' enteredAt records share one hidden class (a spread copy gave each its own, 0.2 KB)", () => {
    const [first, second] = [startedJob(), startedJob()];
    assert.deepEqual(Object.keys(first.context.enteredAt), Object.keys(second.context.enteredAt));
    assert.equal(haveSameMap(first.context.enteredAt, second.context.enteredAt), true);
  });
});

describe('assign resolves as xstate does, without rebuilding the snapshot (machines/assign.ts)', () => {
  const machine = setup({
    types: { context: {} as { count: number; label: string }, events: {} as { type: 'bump' } | { type: 'spawn' } | { type: 'move' } },
    actions: {
      bump: assign({ count: ({ context }) => context.count + 1, label: 'bumped' }),
      spawnInside: assign(({ spawn }) => {
        spawn(fromTransition((state: null) => state, null));
        return {};
      }),
    },
  }).createMachine({
    context: { count: 0, label: 'new' },
    initial: 'idle',
    states: {
      idle: { tags: ['waiting'], on: { bump: { actions: 'bump' }, spawn: { actions: 'spawnInside' }, move: 'busy' } },
      busy: { tags: ['working'], on: { bump: { actions: 'bump' } } },
    },
  });

  it('the next snapshot has the update over the context, and the state value and tags it had', () => {
    const actor = createActor(machine).start();
    actor.send({ type: 'bump' });
    actor.send({ type: 'bump' });
    const snapshot = actor.getSnapshot();
    assert.deepEqual(snapshot.context, { count: 2, label: 'bumped' });
    assert.equal(snapshot.value, 'idle');
    assert.equal(snapshot.hasTag('waiting'), true);
    assert.equal(snapshot.matches('idle'), true);
    actor.send({ type: 'move' });
    actor.send({ type: 'bump' });
    assert.equal(actor.getSnapshot().value, 'busy');
    assert.equal(actor.getSnapshot().hasTag('working'), true);
    assert.equal(actor.getSnapshot().hasTag('waiting'), false);
    assert.deepEqual(actor.getPersistedSnapshot(), { status: 'active', output: undefined, error: undefined, value: 'busy', historyValue: {}, context: { count: 3, label: 'bumped' }, children: {} });
  });

  it('an assignment that spawns is refused with the way to spawn instead', () => {
    const actor = createActor(machine);
    actor.subscribe({ error: () => {} });
    actor.start();
    actor.send({ type: 'spawn' });
    const snapshot = actor.getSnapshot();
    assert.equal(snapshot.status, 'error');
    assert.match(String(snapshot.error), /enqueue\.spawnChild/);
  });
});
