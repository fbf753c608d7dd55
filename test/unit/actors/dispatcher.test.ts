import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import v8 from 'node:v8';
import vm from 'node:vm';
import { pino } from 'pino';
import { Dispatcher } from '../../../actors/agents/dispatcher.ts';
import { AgentRegistry } from '../../../actors/agents/registry.ts';
import type { AgentSession } from '../../../actors/agents/registry.ts';
import type { IncomingRunEvent } from '../../../actors/runs/supervisor.ts';
import type { AgentRequirements } from '../../../machines/types.ts';

const log = pino({ level: 'silent' });

function needs(label: string): AgentRequirements {
  return { runsOn: [{ kind: 'exact', value: label }], excludeLabels: [], runsOnPick: 'deterministic', executor: 'any' };
}

function session(agentId: string, label: string, maxConcurrency = 1): AgentSession {
  return {
    ...{ agentId, labels: [label], taints: [], properties: { 'switchyard.runSteps': true }, connectionId: `c-${agentId}`, tokenId: null },
    ...{ maxConcurrency, scalerManaged: false, unusable: null, lastFrameAt: 0, slots: new Map(), sent: new Set<string>() },
    link: { send: () => undefined, close: () => undefined },
  };
}

/** A dispatcher over a real registry; what it tells runs is recorded in order. */
function setup() {
  const registry = new AgentRegistry(() => 0);
  const told: { runId: string; event: IncomingRunEvent }[] = [];
  const dispatcher = new Dispatcher(registry, (runId, event) => Promise.resolve(void told.push({ runId, event })), log);
  const request = (runId: string, label: string) => dispatcher.requestPlacement({ runId, kind: 'requestPlacement', effectId: `${runId}:0:0`, payload: { jobKey: 'build', requirements: needs(label), attempt: 1 } });
  const granted = () => told.filter((t) => t.event.type === 'placement.granted');
  const reasons = (runId: string) => told.filter((t) => t.runId === runId && t.event.type === 'placement.none').map((t) => (t.event as { reason: { message: string } }).reason.message);
  return { registry, dispatcher, told, request, granted, reasons };
}

v8.setFlagsFromString('--allow-natives-syntax');
const haveSameMap = vm.runInThisContext('(a, b) => %HaveSameMap(a, b)') as (a: object, b: object) => boolean;

const settle = () => new Promise((resolve) => setImmediate(resolve));

describe('Dispatcher: the waiting queue', () => {
  it('a freed slot goes to the job queued first, whatever else waits for other agents', async () => {
    const { registry, dispatcher, request, granted } = setup();
    const agent = session('a', 'linux');
    registry.add(agent);
    await request('run-1', 'linux');
    for (let i = 0; i < 50; i++) await request(`gpu-${i}`, 'gpu');
    await request('run-2', 'linux');
    await request('run-3', 'linux');
    assert.deepEqual(granted().map((g) => g.runId), ['run-1']);
    const [dispatchId] = [...agent.slots.keys()];
    registry.release('a', dispatchId ?? '');
    await settle();
    assert.deepEqual(granted().map((g) => g.runId), ['run-1', 'run-2']);
    assert.equal(dispatcher.waitingCount, 51);
  });

  it('a grant its run could not store gives the agent slot back, and the next waiting job takes the agent', async () => {
    const registry = new AgentRegistry(() => 0);
    const granted: string[] = [];
    const sendToRun = (runId: string, event: IncomingRunEvent) => {
      if (event.type !== 'placement.granted') return Promise.resolve();
      granted.push(runId);
      return runId === 'run-1' ? Promise.reject(new Error('its writes were given up')) : Promise.resolve();
    };
    const dispatcher = new Dispatcher(registry, sendToRun, log);
    const request = (runId: string) => dispatcher.requestPlacement({ runId, kind: 'requestPlacement', effectId: `${runId}:0:0`, payload: { jobKey: 'build', requirements: needs('linux'), attempt: 1 } });
    await request('run-1');
    await request('run-2');
    const agent = session('a', 'linux');
    registry.add(agent);
    await settle();
    await settle();
    assert.deepEqual(granted, ['run-1', 'run-2'], 'the slot run-1 could not use went to run-2');
    assert.deepEqual([...agent.slots.values()].map((slot) => slot.runId), ['run-2']);
    assert.equal(dispatcher.waitingCount, 0, 'run-1 is not queued again: its restored run asks again');
  });

  it('a pass over jobs whose kind of agent has no free slot tells no run anything new, but a changed reason is told', async () => {
    const { registry, dispatcher, told, request, reasons } = setup();
    registry.add(session('busy', 'linux'));
    await request('holder', 'linux');
    for (let i = 0; i < 20; i++) await request(`waiter-${i}`, 'linux');
    assert.deepEqual(reasons('waiter-0'), ['1 matching agent is busy']);
    const before = told.length;
    await dispatcher.offer();
    assert.equal(told.length, before, 'unchanged reasons are not sent again');
    registry.add(session('busy-2', 'linux'));
    await settle();
    await dispatcher.offer();
    assert.equal(told.filter((t) => t.event.type === 'placement.granted').length, 2, 'the new agent took one job');
    assert.deepEqual(reasons('waiter-1').at(-1), 'all 2 matching agents are busy', 'the rest were told the new reason');
  });

  it('a job asking again with the reason it already shows is not told it again; a different reason is told', async () => {
    const { dispatcher, told, reasons } = setup();
    const again = (runId: string, heldReason: string) =>
      dispatcher.requestPlacement({ runId, kind: 'requestPlacement', effectId: `${runId}:1:0`, payload: { jobKey: 'build', requirements: needs('gpu'), attempt: 1, heldReason } });
    await again('restored-same', 'no connected agent matches labels gpu');
    assert.deepEqual(told, [], 'an unchanged reason costs the run no event');
    assert.equal(dispatcher.isWaiting('restored-same', 'build'), true, 'the job still waits here for an agent');
    await again('restored-changed', '1 matching agent is busy');
    assert.deepEqual(reasons('restored-changed'), ['no connected agent matches labels gpu']);
  });

  it('forgetting a run takes only its jobs out of the queue', async () => {
    const { dispatcher, request } = setup();
    await request('keep', 'nobody');
    await request('drop', 'nobody');
    dispatcher.forgetRun('drop');
    assert.equal(dispatcher.isWaiting('keep', 'build'), true);
    assert.equal(dispatcher.isWaiting('drop', 'build'), false);
  });

  it('a run with several waiting jobs leaves the queue whole when forgotten, and one job placed leaves its sibling waiting', async () => {
    const { registry, dispatcher } = setup();
    const ask = (runId: string, jobKey: string, label: string) =>
      dispatcher.requestPlacement({ runId, kind: 'requestPlacement', effectId: `${runId}:${jobKey}`, payload: { jobKey, requirements: needs(label), attempt: 1 } });
    for (const jobKey of ['a', 'b', 'c']) await ask('many', jobKey, 'nobody');
    await ask('pair', 'x', 'gpu');
    await ask('pair', 'y', 'nobody');
    dispatcher.forgetRun('many');
    assert.deepEqual(['a', 'b', 'c'].map((jobKey) => dispatcher.isWaiting('many', jobKey)), [false, false, false]);
    registry.add(session('gpu-1', 'gpu'));
    await settle();
    assert.deepEqual([dispatcher.isWaiting('pair', 'x'), dispatcher.isWaiting('pair', 'y')], [false, true]);
    dispatcher.forgetRun('pair');
    assert.equal(dispatcher.isWaiting('pair', 'y'), false);
  });

  it("waiting jobs' requests share one hidden class (a spread gave each its own, 0.2 KB of every waiting job)", async () => {
    const { dispatcher, request } = setup();
    await request('first', 'nobody');
    await request('second', 'nobody');
    const waiting = (dispatcher as unknown as { waiting: { get: (key: string) => object } }).waiting;
    const [first, second] = [...(dispatcher as unknown as { waiting: { keys: () => string[] } }).waiting.keys()].map((key) => waiting.get(key));
    assert.ok(first && second);
    assert.equal(haveSameMap(first, second), true);
  });

  it('placeNow takes a free agent only when no job queued earlier could take it', async () => {
    const { registry, dispatcher, request } = setup();
    const linux = session('l', 'linux');
    registry.add(linux);
    await request('gpu-waiting', 'gpu');
    const grant = dispatcher.placeNow('fresh', { jobKey: 'build', requirements: needs('linux'), attempt: 1 });
    assert.ok(grant?.type === 'placement.granted');
    assert.equal(grant.agentId, 'l', 'a job waiting for another kind of agent does not hold it back');
    assert.equal(linux.slots.size, 1, 'the slot is reserved at once');
    dispatcher.undoPlacement(grant);
    assert.equal(linux.slots.size, 0, 'and given back on undo');
    registry.add(session('busy', 'mac'));
    await request('mac-holder', 'mac');
    await request('mac-waiting', 'mac');
    // A mac agent whose capacity the dispatcher has not offered yet (the offer runs after the event that freed it).
    (registry as unknown as { sessions: Map<string, AgentSession> }).sessions.set('mac-2', session('mac-2', 'mac'));
    assert.equal(dispatcher.placeNow('fresh-mac', { jobKey: 'build', requirements: needs('mac'), attempt: 1 }), null, 'a queued mac job goes first');
    await dispatcher.offer();
    assert.equal(dispatcher.isWaiting('mac-waiting', 'build'), false, 'and gets the agent at the next offer');
  });

  it('placeNow tells a job no agent here can take why at once, and the queued request holding that reason is not told it again', async () => {
    const { registry, dispatcher, told } = setup();
    registry.add(session('busy', 'linux'));
    await dispatcher.requestPlacement({ runId: 'holder', kind: 'requestPlacement', effectId: 'holder:0:0', payload: { jobKey: 'build', requirements: needs('linux'), attempt: 1 } });
    const none = dispatcher.placeNow('fresh', { jobKey: 'build', requirements: needs('linux'), attempt: 1 });
    assert.deepEqual(none, { type: 'placement.none', jobKey: 'build', reason: { kind: 'capacity', message: '1 matching agent is busy' } });
    assert.ok(none?.type === 'placement.none');
    const before = told.length;
    await dispatcher.requestPlacement({ runId: 'fresh', kind: 'requestPlacement', effectId: 'fresh:0:0', payload: { jobKey: 'build', requirements: needs('linux'), attempt: 1, heldReason: none.reason.message } });
    assert.equal(told.length, before, 'the run already holds the reason');
    assert.equal(dispatcher.isWaiting('fresh', 'build'), true, 'and the job waits in the queue');
    const again = dispatcher.placeNow('restored', { jobKey: 'build', requirements: needs('linux'), attempt: 1, heldReason: '1 matching agent is busy' });
    assert.equal(again, null, 'a job asking again that already shows the reason is not told it again');
    const gpu = dispatcher.placeNow('gpu', { jobKey: 'build', requirements: needs('gpu'), attempt: 1 });
    assert.equal(gpu?.type === 'placement.none' && gpu.reason.message, 'no connected agent matches labels gpu');
  });

  it('with a scaler, placeNow leaves a job no agent here can take to the queue, which asks the scaler', () => {
    const { dispatcher } = setup();
    const asked: string[] = [];
    dispatcher.attachScaler({ requestAgent: (request) => (asked.push(request.runId), null), unavailableFor: () => false, onGranted: () => undefined });
    assert.equal(dispatcher.placeNow('scaled', { jobKey: 'build', requirements: needs('gpu'), attempt: 1 }), null);
    assert.deepEqual(asked, [], 'the scaler is asked only once the request is queued');
  });

  it('a freed slot looks at the jobs its kind can take and stops there: the rest of a long queue is not walked', async () => {
    const { registry, dispatcher, request, granted } = setup();
    const agent = session('a', 'linux');
    registry.add(agent);
    for (let i = 0; i < 1_000; i++) await request(`run-${i}`, 'linux');
    const find = registry.find.bind(registry);
    let lookups = 0;
    registry.find = (requirements) => {
      lookups += 1;
      return find(requirements);
    };
    registry.release('a', [...agent.slots.keys()][0] ?? '');
    await settle();
    assert.deepEqual(granted().map((g) => g.runId), ['run-0', 'run-1']);
    assert.ok(lookups < 10, `${lookups} agent lookups for one freed slot`);
    assert.equal(dispatcher.waitingCount, 998);
  });
});
