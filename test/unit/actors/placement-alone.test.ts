import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { pino } from 'pino';
import { Dispatcher } from '../../../actors/agents/dispatcher.ts';
import { PlacementExchange } from '../../../actors/agents/placement-exchange.ts';
import type { OfferedJob, PlacementExchangeStore } from '../../../actors/agents/placement-exchange.ts';
import { AgentRegistry } from '../../../actors/agents/registry.ts';
import type { AgentSession } from '../../../actors/agents/registry.ts';
import type { IncomingRunEvent } from '../../../actors/runs/supervisor.ts';
import type { AgentRequirements } from '../../../machines/types.ts';

const log = pino({ level: 'silent' });
const linux: AgentRequirements = { runsOn: [{ kind: 'exact', value: 'linux' }], excludeLabels: [], runsOnPick: 'deterministic', executor: 'any' };

function session(agentId: string): AgentSession {
  return {
    ...{ agentId, labels: ['linux'], taints: [], properties: { 'switchyard.runSteps': true }, connectionId: `c-${agentId}`, tokenId: null },
    ...{ maxConcurrency: 1, scalerManaged: false, unusable: null, lastFrameAt: 0, slots: new Map(), sent: new Set<string>() },
    link: { send: () => undefined, close: () => undefined },
  };
}

/** The shared placement table as a list of calls, with peers alive or not as the test says. */
function recordingStore(peers: { alive: boolean }) {
  const calls: string[] = [];
  const table = new Map<string, OfferedJob>();
  const key = (job: OfferedJob) => `${job.runId}/${job.jobKey}/${job.attempt}`;
  const store: PlacementExchangeStore = {
    publish: (jobs) => {
      for (const job of jobs) {
        calls.push(`publish ${job.runId}`);
        table.set(key(job), job);
      }
      return Promise.resolve();
    },
    open: () => Promise.resolve([]),
    claim: (job) => Promise.resolve((calls.push(`claim ${job.runId}`), table.has(key(job)))),
    reclaim: (job) => {
      calls.push(`reclaim ${job.runId}`);
      if (table.delete(key(job))) return Promise.resolve('taken' as const);
      return Promise.resolve([...table.values()].some((j) => j.runId === job.runId && j.jobKey === job.jobKey) ? ('held' as const) : ('absent' as const));
    },
    withdraw: (runId) => Promise.resolve(void calls.push(`withdraw ${runId}`)),
    peersAlive: () => Promise.resolve(peers.alive),
    announce: () => Promise.resolve(void calls.push('announce')),
  };
  return { store, calls, table };
}

async function setup(peers: { alive: boolean }, stillWaiting: (runId: string) => boolean = () => true) {
  const registry = new AgentRegistry(() => 0);
  const told: { runId: string; event: IncomingRunEvent }[] = [];
  const dispatcher = new Dispatcher(registry, (runId, event) => Promise.resolve(void told.push({ runId, event })), log);
  const recorded = recordingStore(peers);
  const exchange = new PlacementExchange(recorded.store, registry, (job) => dispatcher.findFor(job), () => Promise.resolve(), log);
  dispatcher.attachExchange(exchange, (runId) => stillWaiting(runId));
  await exchange.join();
  const request = (runId: string) => dispatcher.requestPlacement({ runId, kind: 'requestPlacement', effectId: `${runId}:0:0`, payload: { jobKey: 'build', requirements: linux, attempt: 1 } });
  const granted = () => told.filter((t) => t.event.type === 'placement.granted').map((t) => t.runId);
  /** Agent `a` busy with run-1 and run-2 queued behind it; `freeSlot` ends run-1's attempt. */
  const busyWithRun1 = async () => {
    const agent = session('a');
    registry.add(agent);
    await request('run-1');
    await request('run-2');
    return { agent, freeSlot: () => registry.release('a', [...agent.slots.keys()][0] ?? '') };
  };
  return { registry, dispatcher, exchange, request, granted, busyWithRun1, ...recorded };
}

const settle = () => new Promise((resolve) => setImmediate(resolve));

describe('placement requests are shared only while another coordinator is alive', () => {
  it('alone, a job that waits is not published and its grant costs no write to the shared table', async () => {
    const { busyWithRun1, granted, calls } = await setup({ alive: false });
    const { freeSlot } = await busyWithRun1();
    freeSlot();
    await settle();
    assert.deepEqual(granted(), ['run-1', 'run-2']);
    assert.deepEqual(calls, ['announce'], 'nothing but the announcement touched the shared table');
  });

  it('when a peer joins, every job still waiting is published at once', async () => {
    const peers = { alive: false };
    const { registry, exchange, request, calls, table } = await setup(peers);
    registry.add(session('a'));
    await request('run-1');
    await request('run-2');
    await request('run-3');
    assert.equal(table.size, 0);
    peers.alive = true;
    await exchange.checkPeers();
    await settle();
    assert.deepEqual(calls.filter((c) => c.startsWith('publish')).sort(), ['publish run-2', 'publish run-3']);
  });

  it('with a peer alive, the owner grants a published job after taking it back in one write (no claim, no withdrawal)', async () => {
    const { busyWithRun1, granted, calls } = await setup({ alive: true });
    const { freeSlot } = await busyWithRun1();
    assert.deepEqual(calls, ['announce', 'publish run-2']);
    freeSlot();
    await settle();
    assert.deepEqual(granted(), ['run-1', 'run-2']);
    assert.deepEqual(calls, ['announce', 'publish run-2', 'reclaim run-2']);
  });

  it('a job a peer holds is not granted here: the reclaim loses and the job keeps waiting', async () => {
    const { busyWithRun1, dispatcher, granted, table, calls } = await setup({ alive: true });
    const { agent, freeSlot } = await busyWithRun1();
    table.clear(); // a peer claimed and withdrew it: its grant is on the way to the run
    freeSlot();
    await settle();
    assert.deepEqual(granted(), ['run-1']);
    assert.equal(dispatcher.waitingCount, 1);
    assert.equal(agent.slots.size, 0, 'the slot reserved for the lost claim was given back');
    await dispatcher.offer();
    assert.equal(calls.filter((c) => c.startsWith('reclaim')).length, 1, 'not tried again before the peer’s grant could have reached the run');
  });

  it('a request gone with no grant behind it (chaos seed 279182347): once a grant would have arrived, the job still waits and is granted here', async () => {
    const { busyWithRun1, granted, table, calls, registry } = await setup({ alive: true });
    const { freeSlot } = await busyWithRun1();
    table.clear(); // removed by an adoption's clean-up, say: no peer claimed it and no grant is coming
    freeSlot();
    await settle();
    assert.deepEqual(granted(), ['run-1']);
    await new Promise((resolve) => setTimeout(resolve, 3_300));
    assert.deepEqual(granted(), ['run-1', 'run-2'], 'granted here, not held back for ever beside a free agent');
    assert.deepEqual(calls.filter((c) => c.startsWith('reclaim')), ['reclaim run-2'], 'its request is no longer taken back: it is not published');
    assert.equal(registry.get('a')?.slots.size, 1);
  });

  it("a request gone because a peer granted it: the peer's grant reaches the run meanwhile, and the job is not granted here again", async () => {
    const placedByPeer = new Set<string>();
    const { busyWithRun1, granted, table, dispatcher, registry } = await setup({ alive: true }, (runId) => !placedByPeer.has(runId));
    const { freeSlot } = await busyWithRun1();
    table.clear(); // a peer claimed it, sent its grant and withdrew the request
    freeSlot();
    await settle();
    placedByPeer.add('run-2'); // the peer's grant reached the run: its job no longer waits for an agent
    await new Promise((resolve) => setTimeout(resolve, 3_300));
    assert.deepEqual(granted(), ['run-1']);
    assert.equal(dispatcher.waitingCount, 0, 'the job left the queue');
    assert.equal(registry.get('a')?.slots.size, 0, 'and the free slot stays free');
  });

  it('a database error while taking a published job back leaves the job waiting and its slot free, and the job is offered again', async () => {
    const { busyWithRun1, dispatcher, granted, store, calls } = await setup({ alive: true });
    const reclaim = store.reclaim.bind(store);
    let failures = 1;
    store.reclaim = (job: OfferedJob) => (failures-- > 0 ? Promise.reject(new Error('Connection terminated unexpectedly')) : reclaim(job));
    const { agent, freeSlot } = await busyWithRun1();
    freeSlot();
    await settle();
    assert.deepEqual(granted(), ['run-1']);
    assert.equal(dispatcher.waitingCount, 1, 'the job is still queued');
    assert.equal(agent.slots.size, 0, 'the slot reserved for it was given back');
    await new Promise((resolve) => setTimeout(resolve, 1_200));
    assert.deepEqual(granted(), ['run-1', 'run-2'], 'offered again after the error, with no capacity event');
    assert.deepEqual(calls.filter((c) => c.startsWith('reclaim')), ['reclaim run-2']);
  });
});

describe('a coordinator offers its free agents to the requests its peers published', () => {
  it('grants them together, each slot reserved before any claim goes out; a claim that fails gives its slot back', async () => {
    const registry = new AgentRegistry(() => 0);
    for (const id of ['a', 'b', 'c']) registry.add(session(id));
    const peerJob = (runId: string): OfferedJob => ({ runId, jobKey: 'build', attempt: 1, requirements: linux });
    const claims: { runId: string; answer: (claimed: boolean | Error) => void }[] = [];
    const granted: string[] = [];
    const store: PlacementExchangeStore = {
      ...recordingStore({ alive: true }).store,
      open: () => Promise.resolve([peerJob('p-1'), peerJob('p-2'), peerJob('p-3')]),
      claim: (job) => new Promise((resolve, reject) => claims.push({ runId: job.runId, answer: (claimed) => (claimed instanceof Error ? reject(claimed) : resolve(claimed)) })),
    };
    const dispatcher = new Dispatcher(registry, () => Promise.resolve(), log);
    const exchange = new PlacementExchange(store, registry, (job) => dispatcher.findFor(job), (runId) => Promise.resolve(void granted.push(runId)), log);
    const offering = exchange.offerRemote();
    await new Promise((resolve) => setImmediate(resolve));
    assert.deepEqual(claims.map((c) => c.runId), ['p-1', 'p-2', 'p-3'], 'three claims in flight at once');
    assert.deepEqual(registry.all().map((s) => s.slots.size), [1, 1, 1], 'one slot each, reserved before the claims');
    claims[0]?.answer(true);
    claims[1]?.answer(false);
    claims[2]?.answer(new Error('connection reset'));
    await offering;
    assert.deepEqual(granted, ['p-1']);
    assert.equal(registry.all().reduce((n, s) => n + s.slots.size, 0), 1, 'the lost claim and the failed one gave their slots back');
  });
});

it('a peer’s request left behind by a run that has ended since is granted to no one: the dropped grant gives its slot back', async () => {
  const registry = new AgentRegistry(() => 0);
  registry.add(session('a'));
  const store: PlacementExchangeStore = {
    ...recordingStore({ alive: true }).store,
    open: () => Promise.resolve([{ runId: 'ended', jobKey: 'build', attempt: 1, requirements: linux }]),
    claim: () => Promise.resolve(true),
  };
  const dispatcher = new Dispatcher(registry, () => Promise.resolve(), log);
  const exchange = new PlacementExchange(store, registry, (job) => dispatcher.findFor(job), () => Promise.resolve('dropped'), log);
  await exchange.offerRemote();
  assert.equal(registry.get('a')?.slots.size, 0, 'the agent is free again for the next job');
});
