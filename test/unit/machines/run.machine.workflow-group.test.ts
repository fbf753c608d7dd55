import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { RunEvent } from '../../../machines/run.machine.ts';
import { RunHarness, ack, jobPlan, status } from '../../support/machines.ts';
import type { RecordedIntent } from '../../support/machines.ts';

const SCOPE = { repository: 'acme/app', policy: { cancelInProgress: false, max: 1 } };
const KEY = 'acme/app::deploy-main';

/** `job` of the run reports the workflow's group, as the stock agent does before its first step (CONC-7). */
function report(h: RunHarness, job: string, requestId: string, at: number): void {
  const owner = h.child(job).context.assignment;
  assert.ok(owner, `${job} is assigned`);
  h.send({ type: 'agent.concurrency.report', jobKey: job, agentId: owner.agentId, dispatchId: owner.dispatchId, requestId, group: 'deploy-main', at });
}

const answers = (intents: readonly RecordedIntent[]) =>
  intents.filter((i) => i.type === 'answerConcurrency').map((i) => {
    const params = i.params as { requestId: string; action: string; reason?: string };
    return [params.requestId, params.action, params.reason ?? null];
  });

function running(): RunHarness {
  const h = RunHarness.start([jobPlan('a'), jobPlan('b')], { concurrencyScope: SCOPE });
  for (const job of ['a', 'b']) {
    h.dispatch(job, 10);
    h.fromOwner(job, (owner) => ack(11, owner));
    h.fromOwner(job, (owner) => status('running', 12, owner));
  }
  h.take();
  return h;
}

describe('run machine: the workflow’s own concurrency group (job.concurrency.report, CONC-7)', () => {
  it('the first report asks the group once for the run; queued, every report hears wait; granted, every one proceeds with its own request id', () => {
    const h = running();
    report(h, 'a', 'req-a', 20);
    assert.deepEqual(h.take().map((i) => [i.by, i.type, i.params]), [['run', 'requestConcurrency', { jobKey: null, key: KEY, policy: SCOPE.policy }]]);
    report(h, 'b', 'req-b', 21);
    assert.deepEqual(h.take(), [], 'one request per key and run');
    h.send({ type: 'run.concurrency.queued', key: KEY, position: 2, at: 22 });
    const waiting = `waiting for concurrency group ${KEY} (position 2)`;
    assert.deepEqual(answers(h.take()), [['req-a', 'wait', waiting], ['req-b', 'wait', waiting]]);
    h.send({ type: 'run.concurrency.granted', key: KEY, at: 30 });
    assert.deepEqual(answers(h.take()), [['req-a', 'proceed', null], ['req-b', 'proceed', null]]);
  });

  it('a report while the run holds the key proceeds at once; a report while queued hears wait at once', () => {
    const h = running();
    report(h, 'a', 'req-a', 20);
    h.send({ type: 'run.concurrency.queued', key: KEY, position: 1, at: 21 });
    h.take();
    report(h, 'b', 'req-b', 22);
    assert.deepEqual(answers(h.take()), [['req-b', 'wait', `waiting for concurrency group ${KEY} (position 1)`]]);
    h.send({ type: 'run.concurrency.granted', key: KEY, at: 30 });
    h.take();
    report(h, 'b', 'req-b2', 31);
    assert.deepEqual(answers(h.take()), [['req-b2', 'proceed', null]]);
  });

  it('cancelled while queued (superseded, say): each waiting report hears cancel with the reason; the run gives the key back when it ends', () => {
    const h = running();
    report(h, 'a', 'req-a', 20);
    h.send({ type: 'run.concurrency.queued', key: KEY, position: 1, at: 21 });
    h.take();
    const cancel: RunEvent = { type: 'run.cancel', reason: 'superseded by run r2 in concurrency group acme/app::deploy-main', force: false, by: 'concurrency', at: 25 };
    h.send(cancel);
    assert.deepEqual(answers(h.take()), [['req-a', 'cancel', 'superseded by run r2 in concurrency group acme/app::deploy-main']]);
    report(h, 'b', 'req-b', 26);
    assert.deepEqual(answers(h.take()), [['req-b', 'cancel', 'superseded by run r2 in concurrency group acme/app::deploy-main']], 'a report while cancelling is refused');
    for (const job of ['a', 'b']) {
      const owner = h.child(job).context.assignment;
      assert.ok(owner);
      h.send({ ...status('cancelled', 30, owner), jobKey: job });
    }
    assert.equal(h.snapshot.value, 'cancelled');
    assert.deepEqual(h.take().filter((i) => i.type === 'releaseConcurrency').map((i) => [i.by, i.params]), [['run', { jobKey: null, key: KEY }]]);
  });

  it('the groups survive a restore: a grant after a takeover still reaches the reports asked before it', () => {
    const h = running();
    report(h, 'a', 'req-a', 20);
    h.send({ type: 'run.concurrency.queued', key: KEY, position: 1, at: 21 });
    const restored = h.restore();
    restored.send({ type: 'run.concurrency.granted', key: KEY, at: 40 });
    assert.deepEqual(answers(restored.take()), [['req-a', 'proceed', null]]);
  });
});
