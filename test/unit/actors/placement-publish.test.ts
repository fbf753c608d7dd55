import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { pino } from 'pino';
import { PlacementExchange } from '../../../actors/agents/placement-exchange.ts';
import type { OfferedJob, PlacementExchangeStore } from '../../../actors/agents/placement-exchange.ts';
import { AgentRegistry } from '../../../actors/agents/registry.ts';
import { eventually } from '../../support/runtime.ts';

/** A store whose first `failures` writes fail, as a reset database connection does. */
function flakyStore(failures: number) {
  const written: OfferedJob[] = [];
  let calls = 0;
  const store: PlacementExchangeStore = {
    publish: (jobs) => {
      calls += 1;
      if (calls <= failures) return Promise.reject(new Error('terminating connection due to administrator command'));
      written.push(...jobs);
      return Promise.resolve();
    },
    open: () => Promise.resolve([]),
    claim: () => Promise.resolve(true),
    reclaim: () => Promise.resolve('taken' as const),
    withdraw: () => Promise.resolve(),
    peersAlive: () => Promise.resolve(true),
    announce: () => Promise.resolve(),
  };
  return { store, written, calls: () => calls };
}

const job: OfferedJob = { runId: 'r1', jobKey: 'build', attempt: 1, requirements: { runsOn: [], excludeLabels: [], runsOnPick: 'any', executor: 'any' } };

function exchangeOn(store: PlacementExchangeStore): PlacementExchange {
  return new PlacementExchange(store, new AgentRegistry(), () => ({ none: 'none' }), () => Promise.resolve(), pino({ level: 'silent' }));
}

describe('a placement request whose write fails is written again', () => {
  it('until it is stored: a job is published once per attempt, so a lost write would strand it', async () => {
    const flaky = flakyStore(2);
    exchangeOn(flaky.store).publish(job);
    await eventually(() => flaky.written.length === 1, 5_000, 'the request to be written on the third try');
    assert.equal(flaky.calls(), 3);
  });

  it('not once the job is withdrawn', async () => {
    const flaky = flakyStore(100);
    const exchange = exchangeOn(flaky.store);
    exchange.publish(job);
    await eventually(() => flaky.calls() >= 1, 1_000, 'the first write');
    exchange.withdraw(job.runId, job.jobKey);
    const calls = flaky.calls();
    await new Promise((resolve) => setTimeout(resolve, 700));
    assert.ok(flaky.calls() <= calls + 1, 'at most a retry already under way');
    assert.deepEqual(flaky.written, []);
  });
});

describe('placement requests are written a batch at a time', () => {
  it('a burst takes a few writes, and a request withdrawn while it waits for its batch is never written', async () => {
    const batches: string[][] = [];
    let releaseFirst = () => undefined as void;
    const store: PlacementExchangeStore = {
      ...flakyStore(0).store,
      publish: async (jobs) => {
        batches.push(jobs.map((j) => j.runId));
        if (batches.length === 1) await new Promise<void>((resolve) => (releaseFirst = resolve));
      },
    };
    const exchange = exchangeOn(store);
    exchange.publish(job);
    for (let i = 0; i < 1_200; i++) exchange.publish({ ...job, runId: `burst-${i}` });
    exchange.withdraw('burst-3', 'build');
    releaseFirst();
    await eventually(() => batches.flat().length === 1_200, 5_000, 'the burst to be written');
    assert.deepEqual(batches.map((b) => b.length), [1, 499, 500, 200], 'the lone first request at once, then the burst in batches of 500 (less the withdrawn one)');
    assert.ok(!batches.flat().includes('burst-3'), 'the withdrawn request is left out');
  });
});

describe('the owner takes its own request back before it grants the job on a slot freed here', () => {
  /** A store whose writes wait for `release`, recording the order of writes and deletes. */
  function gatedStore() {
    const log: string[] = [];
    const rows = new Set<string>();
    let release = () => undefined as void;
    const store: PlacementExchangeStore = {
      ...flakyStore(0).store,
      publish: async (jobs) => {
        log.push(`write ${jobs.map((j) => j.runId).join(',')}`);
        await new Promise<void>((resolve) => (release = resolve));
        for (const j of jobs) rows.add(j.runId);
      },
      reclaim: (j) => {
        log.push(`delete ${j.runId}`);
        return Promise.resolve(rows.delete(j.runId) ? ('taken' as const) : ('absent' as const));
      },
    };
    return { store, log, release: () => release() };
  }

  it('one still waiting for its write is taken back at once and never written; one being written is deleted once written, not held back as if a peer held it', async () => {
    const gated = gatedStore();
    const exchange = exchangeOn(gated.store);
    const first = { ...job, runId: 'being-written' };
    const second = { ...job, runId: 'waiting' };
    exchange.publish(first);
    exchange.publish(second);
    assert.equal(await exchange.reclaim(second), 'taken', 'queued behind the first write: taken back without a delete');
    const reclaimFirst = exchange.reclaim(first);
    await new Promise((resolve) => setImmediate(resolve));
    assert.deepEqual(gated.log, ['write being-written'], 'the delete waits for the write');
    gated.release();
    assert.equal(await reclaimFirst, 'taken');
    await new Promise((resolve) => setImmediate(resolve));
    assert.deepEqual(gated.log, ['write being-written', 'delete being-written'], 'the queued request was never written');
  });
});
