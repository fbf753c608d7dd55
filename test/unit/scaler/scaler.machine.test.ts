import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { SimulatedClock, createActor } from 'xstate';
import { scalerMachineRecording } from '../../../machines/scaler.machine.ts';
import type { BackendPlan, ScalerEvent, ScalerInput, ScalerIntent, ScalerSnapshot } from '../../../machines/scaler.machine.ts';

const BARE: BackendPlan = { name: 'local', type: 'bare-metal', maxAgents: 3, maxCpu: null, maxMemoryBytes: null, labelSets: [{ resources: { cpu: 1, memoryBytes: 1e9 }, warm: null }] };
const WARM: BackendPlan = { ...BARE, labelSets: [{ resources: { cpu: 0, memoryBytes: 0 }, warm: { size: 2, idleTimeoutMs: 300_000 } }] };
const INPUT: ScalerInput = {
  caps: { maxAgents: 10, maxCpu: null, maxMemoryBytes: null },
  backends: [BARE],
  timeouts: { spawnMs: 300_000, boundIdleMs: 60_000, unboundIdleMs: 5_000 },
};

/** A scaler on a simulated clock; `snapshot` restores a persisted one. */
function start(overrides: Partial<ScalerInput> = {}, options: { clock?: SimulatedClock; snapshot?: unknown } = {}) {
  const intents: ScalerIntent[] = [];
  const clock = options.clock ?? new SimulatedClock();
  const input = { ...INPUT, ...overrides };
  const machine = scalerMachineRecording((intent) => intents.push(intent));
  const actor = createActor(machine, options.snapshot ? { input, clock, snapshot: options.snapshot as ScalerSnapshot } : { input, clock }).start();
  return {
    actor,
    clock,
    send: (event: ScalerEvent) => actor.send(event),
    take: () => intents.splice(0),
    agents: () => Object.values(actor.getSnapshot().context.agents),
    children: () => Object.keys(actor.getSnapshot().children),
    persisted: () => JSON.parse(JSON.stringify(actor.getPersistedSnapshot())) as unknown,
  };
}

const request = (jobKey: string, suffix: string, at = 0, runId = 'run-1'): ScalerEvent => ({
  type: 'scaler.request',
  runId,
  jobKey,
  candidates: [{ backend: 'local', labelSet: 0 }],
  suffix,
  at,
});

const types = (intents: ScalerIntent[]) => intents.map((i) => i.type).sort();

describe('scaler machine (orchestration.md §15)', () => {
  it('SCL-3: a request reserves one agent bound to the job, named scaler-<type>-<hex>, as a child, and asks for a spawn', () => {
    const h = start();
    h.send(request('build', '1a2b3c4d', 100));
    const [agent] = h.agents();
    assert.equal(agent?.agentId, 'scaler-bare-metal-1a2b3c4d');
    assert.deepEqual(agent?.bound, { runId: 'run-1', jobKey: 'build' });
    assert.equal(agent?.state, 'spawning');
    assert.equal(agent?.spawnDeadlineAt, 300_100);
    assert.deepEqual(h.children(), ['scaler-bare-metal-1a2b3c4d']);
    assert.deepEqual(h.take().map((i) => i.type), ['spawnAgent']);
  });

  it('requests are idempotent per job: asking again while it spawns spawns nothing more', () => {
    const h = start();
    h.send(request('build', 'aaaaaaaa'));
    h.send(request('build', 'bbbbbbbb'));
    assert.equal(h.agents().length, 1);
    assert.equal(h.take().length, 1);
  });

  it('SCL-5: per-backend maxAgents and the global cap hold under 50 requests in one mailbox, one child per reservation', () => {
    const h = start({ caps: { maxAgents: 2, maxCpu: null, maxMemoryBytes: null } });
    for (let i = 0; i < 50; i++) h.send(request(`job-${i}`, i.toString(16).padStart(8, '0')));
    assert.equal(h.agents().length, 2, 'global cap 2 < backend cap 3');
    assert.equal(h.children().length, 2);
    const g = start();
    for (let i = 0; i < 50; i++) g.send(request(`job-${i}`, i.toString(16).padStart(8, '0')));
    assert.equal(g.agents().length, 3, 'backend cap 3');
    assert.deepEqual(g.children().sort(), g.agents().map((a) => a.agentId).sort());
    assert.equal(g.take().filter((i) => i.type === 'spawnAgent').length, 3);
  });

  it('SCL-5: resource caps, per backend and global, count every reservation', () => {
    const h = start({ backends: [{ ...BARE, maxAgents: 100, maxCpu: 2.5 }] });
    for (let i = 0; i < 10; i++) h.send(request(`j${i}`, `0000000${i}`));
    assert.equal(h.agents().length, 2, 'two 1-CPU agents fit under 2.5 CPUs');
    const g = start({ backends: [{ ...BARE, maxAgents: 100 }], caps: { maxAgents: 100, maxCpu: null, maxMemoryBytes: 3.5e9 } });
    for (let i = 0; i < 10; i++) g.send(request(`j${i}`, `0000000${i}`));
    assert.equal(g.agents().length, 3, 'three 1 GB agents under a 3.5 GB global cap');
  });

  it('B14: a spawn that never registers is destroyed at its deadline with no tick, reported, and its reservation freed', () => {
    const h = start({ caps: { maxAgents: 1, maxCpu: null, maxMemoryBytes: null } });
    h.send(request('a', '00000001', 0));
    h.take();
    h.clock.increment(299_999);
    assert.equal(h.agents()[0]?.state, 'spawning');
    assert.equal(h.take().length, 0);
    h.clock.increment(1);
    const intents = h.take();
    assert.deepEqual(types(intents), ['destroyAgent', 'reportSpawnFailure']);
    const failure = intents.find((i) => i.type === 'reportSpawnFailure');
    assert.ok(failure?.type === 'reportSpawnFailure');
    assert.deepEqual(failure.params.bound, { runId: 'run-1', jobKey: 'a' });
    assert.match(failure.params.message, /did not register within 300 s/);
    assert.equal(h.agents()[0]?.state, 'destroying');
    h.send(request('b', '00000002', 300_001));
    assert.equal(h.agents().length, 1, 'still reserved while it is being destroyed');
    h.send({ type: 'scaler.agent.destroyed', agentId: 'scaler-bare-metal-00000001', at: 300_002 });
    assert.deepEqual(h.children(), [], 'the ended child is gone');
    h.send(request('b', '00000003', 300_003));
    assert.deepEqual(h.agents().map((a) => a.agentId), ['scaler-bare-metal-00000003'], 'the freed reservation serves the next job');
  });

  it('a registration before the deadline disarms the spawn deadline', () => {
    const h = start();
    h.send(request('a', '00000001', 0));
    h.send({ type: 'scaler.agent.registered', agentId: 'scaler-bare-metal-00000001', at: 1_000 });
    h.send({ type: 'scaler.agent.assigned', agentId: 'scaler-bare-metal-00000001', runId: 'run-1', jobKey: 'a', at: 1_001 });
    h.take();
    h.clock.increment(3_600_000);
    assert.equal(h.take().length, 0);
    assert.equal(h.agents()[0]?.state, 'busy');
  });

  it('a completed destroy asks the host to offer the freed capacity; a failed spawn leaves the retry to its job\'s backoff', () => {
    const h = start();
    h.send(request('a', '00000001'));
    h.send({ type: 'scaler.agent.registered', agentId: 'scaler-bare-metal-00000001', at: 1 });
    h.send({ type: 'scaler.agent.assigned', agentId: 'scaler-bare-metal-00000001', runId: 'run-1', jobKey: 'a', at: 2 });
    h.send({ type: 'scaler.agent.finished', agentId: 'scaler-bare-metal-00000001', at: 3 });
    h.take();
    h.send({ type: 'scaler.agent.destroyed', agentId: 'scaler-bare-metal-00000001', at: 4 });
    assert.deepEqual(h.take(), [{ type: 'offerCapacity', params: { freedBy: 'scaler-bare-metal-00000001' } }]);
    h.send(request('b', '00000002'));
    h.take();
    h.send({ type: 'scaler.agent.spawn_failed', agentId: 'scaler-bare-metal-00000002', message: 'ENOENT', at: 5 });
    assert.deepEqual(types(h.take()), ['reportSpawnFailure']);
  });

  it('a failed spawn frees its reservation at once and is reported once', () => {
    const h = start();
    h.send(request('a', '00000001'));
    h.take();
    h.send({ type: 'scaler.agent.spawn_failed', agentId: 'scaler-bare-metal-00000001', message: 'ENOENT', at: 5 });
    assert.equal(h.agents().length, 0);
    assert.deepEqual(h.take().map((i) => i.type), ['reportSpawnFailure']);
    h.send({ type: 'scaler.agent.spawn_failed', agentId: 'scaler-bare-metal-00000001', message: 'again', at: 6 });
    assert.equal(h.take().length, 0);
  });

  it('SCL-7: single use — registered, assigned, finished → destroyed; an exit before registering is a spawn failure', () => {
    const h = start();
    h.send(request('a', '00000001'));
    h.send({ type: 'scaler.agent.registered', agentId: 'scaler-bare-metal-00000001', at: 10 });
    assert.equal(h.agents()[0]?.idleDeadlineAt, 60_010, 'a bound agent waits 60 s for its job');
    h.send({ type: 'scaler.agent.assigned', agentId: 'scaler-bare-metal-00000001', runId: 'run-1', jobKey: 'a', at: 11 });
    h.take();
    h.send({ type: 'scaler.agent.finished', agentId: 'scaler-bare-metal-00000001', at: 20 });
    assert.deepEqual(h.take().map((i) => i.type), ['destroyAgent']);
    h.send(request('b', '00000002'));
    h.take();
    h.send({ type: 'scaler.agent.lost', agentId: 'scaler-bare-metal-00000002', reason: 'agent process exited with code 3', at: 30 });
    const intents = h.take();
    assert.deepEqual(types(intents), ['destroyAgent', 'reportSpawnFailure']);
    const failure = intents.find((i) => i.type === 'reportSpawnFailure');
    assert.ok(failure?.type === 'reportSpawnFailure' && /ended before registering: agent process exited with code 3/.test(failure.params.message));
  });

  it('an idle agent whose job went elsewhere is destroyed at its idle deadline, with no tick', () => {
    const h = start();
    h.send(request('a', '00000001'));
    h.send({ type: 'scaler.agent.registered', agentId: 'scaler-bare-metal-00000001', at: 0 });
    h.take();
    h.clock.increment(59_999);
    assert.equal(h.take().length, 0);
    h.clock.increment(1);
    const intents = h.take();
    assert.deepEqual(intents.map((i) => i.type), ['destroyAgent']);
    assert.ok(intents[0]?.type === 'destroyAgent' && intents[0].params.reason === 'idle timeout');
  });

  it('SCL-8: a warm pool is filled on start, serves a request by binding, and is replenished when used or destroyed', () => {
    const h = start({ backends: [WARM] });
    h.send({ type: 'scaler.ids', suffixes: ['00000001', '00000002', '00000003'] });
    assert.deepEqual(h.actor.getSnapshot().context.spareIds, ['00000001', '00000002'], 'no more spare ids than the pools can use');
    h.send({ type: 'scaler.reload', caps: INPUT.caps, backends: [WARM], at: 0 });
    assert.equal(h.agents().length, 2);
    assert.ok(h.agents().every((a) => a.warm && a.bound === null));
    h.take();
    h.send(request('a', '00000009'));
    assert.equal(h.agents().length, 2, 'a spawning warm agent is bound instead of spawning another');
    assert.deepEqual(h.agents()[0]?.bound, { runId: 'run-1', jobKey: 'a' });
    assert.equal(h.take().length, 0);
    h.send({ type: 'scaler.ids', suffixes: ['0000000a'] });
    h.send({ type: 'scaler.agent.assigned', agentId: 'scaler-bare-metal-00000001', runId: 'run-1', jobKey: 'a', at: 1 });
    assert.equal(h.agents().length, 3, 'the used one no longer counts: one more is spawned');
    h.send({ type: 'scaler.agent.registered', agentId: 'scaler-bare-metal-00000002', at: 2 });
    h.clock.increment(3_600_000);
    assert.equal(h.agents().find((a) => a.agentId === 'scaler-bare-metal-00000002')?.state, 'idle', 'a pooled agent has no idle deadline');
    h.send({ type: 'scaler.ids', suffixes: ['0000000b'] });
    h.send({ type: 'scaler.agent.lost', agentId: 'scaler-bare-metal-00000002', reason: 'agent disconnected', at: 3_600_003 });
    h.send({ type: 'scaler.agent.destroyed', agentId: 'scaler-bare-metal-00000002', at: 3_600_004 });
    assert.ok(h.agents().some((a) => a.agentId === 'scaler-bare-metal-0000000b'), 'the destroyed pool agent is replaced');
  });

  it('SCL-6: reconcile after a restart releases records whose resource is gone and re-issues destroys in flight', () => {
    const h = start();
    h.send(request('a', '00000001'));
    h.send(request('b', '00000002'));
    h.send({ type: 'scaler.agent.registered', agentId: 'scaler-bare-metal-00000002', at: 1 });
    h.send({ type: 'scaler.agent.lost', agentId: 'scaler-bare-metal-00000002', reason: 'agent disconnected', at: 2 });
    h.take();
    h.send({ type: 'scaler.reconcile', alive: ['scaler-bare-metal-00000002'], at: 3 });
    assert.deepEqual(h.agents().map((a) => a.agentId), ['scaler-bare-metal-00000002']);
    assert.deepEqual(h.children(), ['scaler-bare-metal-00000002']);
    const intents = h.take();
    assert.deepEqual(types(intents), ['destroyAgent', 'offerCapacity'], 'the released record is capacity for waiting jobs');
    const destroy = intents.find((i) => i.type === 'destroyAgent');
    assert.ok(destroy?.type === 'destroyAgent' && destroy.params.reason === 'agent disconnected');
  });

  it('shutdown destroys every agent and refuses new requests', () => {
    const h = start();
    h.send(request('a', '00000001'));
    h.send(request('b', '00000002'));
    h.take();
    h.send({ type: 'scaler.shutdown', at: 5 });
    assert.equal(h.actor.getSnapshot().value, 'draining');
    assert.deepEqual(h.take().map((i) => i.type), ['destroyAgent', 'destroyAgent']);
    h.send(request('c', '00000003'));
    assert.equal(h.agents().length, 2);
  });
});

describe('scaler deadlines across a restore (DESIGN.md §4)', () => {
  it('the snapshot persists and restores with its reservations and their child actors', () => {
    const h = start();
    h.send(request('a', '00000001'));
    const input: ScalerInput = { caps: { maxAgents: 1, maxCpu: null, maxMemoryBytes: null }, backends: [], timeouts: { spawnMs: 1, boundIdleMs: 1, unboundIdleMs: 1 } };
    const restored = start(input, { snapshot: h.persisted() });
    assert.deepEqual(Object.keys(restored.actor.getSnapshot().context.agents), ['scaler-bare-metal-00000001']);
    assert.deepEqual(restored.children(), ['scaler-bare-metal-00000001']);
  });

  it('a restored spawn deadline fires at its absolute time once the restart reconciles, not spawnMs after the restore', () => {
    const h = start();
    h.send(request('a', '00000001', 0));
    h.clock.increment(100_000);
    const clock = new SimulatedClock();
    clock.set(250_000);
    const restored = start({}, { clock, snapshot: h.persisted() });
    // xstate does not persist delayed events (statelyai/xstate#5331): without the reconcile nothing is armed.
    clock.increment(100_000);
    assert.equal(restored.take().length, 0);
    assert.equal(restored.agents()[0]?.state, 'spawning');
    const again = start({}, { clock: new SimulatedClock(), snapshot: h.persisted() });
    again.clock.set(250_000);
    again.send({ type: 'scaler.reconcile', alive: ['scaler-bare-metal-00000001'], at: 250_000 });
    again.clock.increment(49_999);
    assert.equal(again.take().length, 0, 'not before 300 000');
    again.clock.increment(1);
    assert.deepEqual(types(again.take()), ['destroyAgent', 'reportSpawnFailure']);
    assert.equal(again.agents()[0]?.state, 'destroying');
  });

  it('an idle deadline that passed while the coordinator was down fires as soon as the restart reconciles', () => {
    const h = start();
    h.send(request('a', '00000001', 0));
    h.send({ type: 'scaler.agent.registered', agentId: 'scaler-bare-metal-00000001', at: 10 });
    h.take();
    const clock = new SimulatedClock();
    clock.set(70_000);
    const restored = start({}, { clock, snapshot: h.persisted() });
    restored.send({ type: 'scaler.reconcile', alive: ['scaler-bare-metal-00000001'], at: 70_000 });
    clock.increment(0);
    const intents = restored.take();
    assert.deepEqual(intents.map((i) => i.type), ['destroyAgent']);
    assert.ok(intents[0]?.type === 'destroyAgent' && intents[0].params.reason === 'idle timeout');
  });

  it('a restored idle deadline still in the future fires at its absolute time', () => {
    const h = start();
    h.send(request('a', '00000001', 0));
    h.send({ type: 'scaler.agent.registered', agentId: 'scaler-bare-metal-00000001', at: 10 });
    const clock = new SimulatedClock();
    clock.set(40_000);
    const restored = start({}, { clock, snapshot: h.persisted() });
    restored.send({ type: 'scaler.reconcile', alive: ['scaler-bare-metal-00000001'], at: 40_000 });
    clock.increment(20_009);
    assert.equal(restored.take().length, 0);
    clock.increment(1);
    assert.deepEqual(restored.take().map((i) => i.type), ['destroyAgent']);
  });
});
