import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createActor } from 'xstate';
import { scalerMachine } from '../../../machines/scaler.machine.ts';
import type { BackendPlan, ScalerEvent, ScalerInput, ScalerIntent } from '../../../machines/scaler.machine.ts';

const BARE: BackendPlan = { name: 'local', type: 'bare-metal', maxAgents: 3, maxCpu: null, maxMemoryBytes: null, labelSets: [{ resources: { cpu: 1, memoryBytes: 1e9 }, warm: null }] };

function start(overrides: Partial<ScalerInput> = {}) {
  const intents: ScalerIntent[] = [];
  const machine = scalerMachine.provide({
    actions: {
      spawnAgent: (_, params) => void intents.push({ type: 'spawnAgent', params }),
      destroyAgent: (_, params) => void intents.push({ type: 'destroyAgent', params }),
      reportSpawnFailure: (_, params) => void intents.push({ type: 'reportSpawnFailure', params }),
    },
  });
  const input: ScalerInput = {
    caps: { maxAgents: 10, maxCpu: null, maxMemoryBytes: null },
    backends: [BARE],
    timeouts: { spawnMs: 300_000, boundIdleMs: 60_000, unboundIdleMs: 5_000 },
    ...overrides,
  };
  const actor = createActor(machine, { input }).start();
  return {
    actor,
    send: (event: ScalerEvent) => actor.send(event),
    take: () => intents.splice(0),
    agents: () => Object.values(actor.getSnapshot().context.agents),
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

describe('scaler machine (orchestration.md §15)', () => {
  it('SCL-3: a request reserves one agent bound to the job, named scaler-<type>-<hex>, and asks for a spawn', () => {
    const h = start();
    h.send(request('build', '1a2b3c4d', 100));
    const [agent] = h.agents();
    assert.equal(agent?.agentId, 'scaler-bare-metal-1a2b3c4d');
    assert.deepEqual(agent?.bound, { runId: 'run-1', jobKey: 'build' });
    assert.equal(agent?.state, 'spawning');
    assert.equal(agent?.spawnDeadlineAt, 300_100);
    assert.deepEqual(h.take().map((i) => i.type), ['spawnAgent']);
  });

  it('requests are idempotent per job: asking again while it spawns spawns nothing more', () => {
    const h = start();
    h.send(request('build', 'aaaaaaaa'));
    h.send(request('build', 'bbbbbbbb'));
    assert.equal(h.agents().length, 1);
    assert.equal(h.take().length, 1);
  });

  it('SCL-5: per-backend maxAgents and the global cap hold under 50 requests in one mailbox', () => {
    const h = start({ caps: { maxAgents: 2, maxCpu: null, maxMemoryBytes: null } });
    for (let i = 0; i < 50; i++) h.send(request(`job-${i}`, i.toString(16).padStart(8, '0')));
    assert.equal(h.agents().length, 2, 'global cap 2 < backend cap 3');
    const g = start();
    for (let i = 0; i < 50; i++) g.send(request(`job-${i}`, i.toString(16).padStart(8, '0')));
    assert.equal(g.agents().length, 3, 'backend cap 3');
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

  it('B14: a spawn that never registers is destroyed at its deadline, reported, and its reservation freed', () => {
    const h = start({ caps: { maxAgents: 1, maxCpu: null, maxMemoryBytes: null } });
    h.send(request('a', '00000001', 0));
    h.take();
    h.send({ type: 'scaler.tick', suffixes: [], at: 299_999 });
    assert.equal(h.agents()[0]?.state, 'spawning');
    h.send({ type: 'scaler.tick', suffixes: [], at: 300_000 });
    const intents = h.take();
    assert.deepEqual(intents.map((i) => i.type), ['destroyAgent', 'reportSpawnFailure']);
    const failure = intents[1];
    assert.ok(failure?.type === 'reportSpawnFailure');
    assert.deepEqual(failure.params.bound, { runId: 'run-1', jobKey: 'a' });
    assert.match(failure.params.message, /did not register within 300 s/);
    h.send(request('b', '00000002', 300_001));
    assert.equal(h.agents().length, 1, 'still reserved while it is being destroyed');
    h.send({ type: 'scaler.agent.destroyed', agentId: 'scaler-bare-metal-00000001', at: 300_002 });
    h.send(request('b', '00000003', 300_003));
    assert.deepEqual(h.agents().map((a) => a.agentId), ['scaler-bare-metal-00000003'], 'the freed reservation serves the next job');
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
    assert.deepEqual(intents.map((i) => i.type), ['destroyAgent', 'reportSpawnFailure']);
    assert.ok(intents[1]?.type === 'reportSpawnFailure' && /ended before registering: agent process exited with code 3/.test(intents[1].params.message));
  });

  it('an idle agent whose job went elsewhere is destroyed after its idle timeout', () => {
    const h = start();
    h.send(request('a', '00000001'));
    h.send({ type: 'scaler.agent.registered', agentId: 'scaler-bare-metal-00000001', at: 0 });
    h.take();
    h.send({ type: 'scaler.tick', suffixes: [], at: 59_999 });
    assert.equal(h.take().length, 0);
    h.send({ type: 'scaler.tick', suffixes: [], at: 60_000 });
    assert.deepEqual(h.take().map((i) => i.type), ['destroyAgent']);
  });

  it('SCL-8: a warm pool is filled on ticks, serves a request by binding, and is replenished after use', () => {
    const h = start({ backends: [{ ...BARE, labelSets: [{ resources: { cpu: 0, memoryBytes: 0 }, warm: { size: 2, idleTimeoutMs: 300_000 } }] }] });
    h.send({ type: 'scaler.tick', suffixes: ['00000001', '00000002', '00000003'], at: 0 });
    assert.equal(h.agents().length, 2);
    assert.ok(h.agents().every((a) => a.warm && a.bound === null));
    h.take();
    h.send(request('a', '00000009'));
    assert.equal(h.agents().length, 2, 'a spawning warm agent is bound instead of spawning another');
    assert.equal(h.take().length, 0);
    h.send({ type: 'scaler.agent.assigned', agentId: 'scaler-bare-metal-00000001', runId: 'run-1', jobKey: 'a', at: 1 });
    h.send({ type: 'scaler.tick', suffixes: ['0000000a'], at: 2 });
    assert.equal(h.agents().length, 3, 'the used one no longer counts: one more is spawned');
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
    assert.deepEqual(h.take().map((i) => i.type), ['destroyAgent']);
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

  it('the snapshot persists and restores with its reservations', () => {
    const h = start();
    h.send(request('a', '00000001'));
    const persisted = JSON.parse(JSON.stringify(h.actor.getPersistedSnapshot())) as object;
    const input: ScalerInput = { caps: { maxAgents: 1, maxCpu: null, maxMemoryBytes: null }, backends: [], timeouts: { spawnMs: 1, boundIdleMs: 1, unboundIdleMs: 1 } };
    const restored = createActor(scalerMachine, { snapshot: persisted as never, input }).start();
    assert.deepEqual(Object.keys(restored.getSnapshot().context.agents), ['scaler-bare-metal-00000001']);
  });
});
