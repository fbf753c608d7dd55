import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { JobEvent } from '../../../machines/job.events.ts';
import {
  OWNER,
  RunHarness,
  acceptedJob,
  cancel,
  dispatchedJob,
  intent,
  jobPlan,
  queuedJob,
  startedJob,
  stepJob,
} from '../../support/machines.ts';

const AT = 9_000;

function restored(liveAgents: string[]): JobEvent {
  return { type: 'job.restored', liveAgents, at: AT };
}

describe('job machine: restored in a new process (FO-2)', () => {
  it('a queued job asks for placement again and stays queued', () => {
    const [same, intents] = stepJob(queuedJob(), restored([]));
    assert.equal(same.value, 'queued');
    assert.deepEqual(intents, [intent.placement(0)]);
  });

  it('a job waiting for an agent asks for placement again with the reason it shows, and keeps waiting', () => {
    const [waiting] = stepJob(queuedJob(), { type: 'placement.none', reason: { kind: 'capacity', message: 'busy' }, at: 2_000 });
    const [same, intents] = stepJob(waiting, restored([]));
    assert.deepEqual(same.value, { waiting: 'agent' });
    const asked = intent.placement(0);
    assert.deepEqual(intents, [{ ...asked, params: { ...asked.params, heldReason: 'busy' } }]);
  });

  it('a job whose agent is live somewhere changes nothing', () => {
    for (const job of [dispatchedJob(), acceptedJob(), startedJob()]) {
      const [same, intents] = stepJob(job, restored([OWNER.agentId]));
      assert.deepEqual(same.value, job.value);
      assert.deepEqual(intents, []);
    }
  });

  it('a started job whose agent is gone goes recovering after start: slot freed, recovery window armed', () => {
    const [recovering, intents] = stepJob(startedJob(), restored(['agent-9']));
    assert.deepEqual(recovering.value, { recovering: 'afterStart' });
    assert.deepEqual(intents, [intent.disarm('lease'), intent.releaseSlot(), intent.arm('recovery', AT + 120_000)]);
  });

  it('a dispatched or accepted job whose agent is gone goes recovering before start, even on a scaler agent', () => {
    for (const job of [dispatchedJob('scaler'), acceptedJob('scaler'), acceptedJob()]) {
      const [recovering] = stepJob(job, restored([]));
      assert.deepEqual(recovering.value, { recovering: 'beforeStart' });
    }
  });

  it('a cancelling job whose agent is gone ends cancelled', () => {
    const [cancelling] = stepJob(startedJob(), cancel(3_000, false));
    const [done] = stepJob(cancelling, restored([]));
    assert.equal(done.value, 'cancelled');
  });

  it('a recovering job keeps its window', () => {
    const [recovering] = stepJob(startedJob(), restored([]));
    const [same, intents] = stepJob(recovering, restored([]));
    assert.deepEqual(same.value, { recovering: 'afterStart' });
    assert.deepEqual(intents, []);
  });
});

describe('run machine: run.restored tells every open job', () => {
  it('one event re-asks placement for the waiting job and sends the running one whose agent is gone to recovery', () => {
    const h = RunHarness.start([jobPlan('build'), jobPlan('test')]);
    const owner = h.dispatch('build', 2_000);
    h.fromOwner('build', (o) => ({ type: 'agent.job.ack', ...o, at: 2_100 }));
    h.fromOwner('build', (o) => ({ type: 'agent.job.status', state: 'running', ...o, at: 2_200 }));
    const restored = h.restore();
    restored.send({ type: 'run.restored', liveAgents: [], at: AT });
    assert.deepEqual(restored.jobStates(), { build: 'recovering.afterStart', test: 'queued' });
    const intents = restored.take().map((i) => [i.by, i.type]);
    assert.ok(intents.some(([by, type]) => by === 'test' && type === 'requestPlacement'), JSON.stringify(intents));
    assert.ok(intents.some(([by, type]) => by === 'build' && type === 'releaseSlot'), JSON.stringify(intents));
    assert.equal(restored.child('build').context.assignment?.agentId, owner.agentId);
  });
});
