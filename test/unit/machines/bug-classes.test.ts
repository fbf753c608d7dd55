import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { JobEvent } from '../../../machines/job.events.ts';
import {
  RunHarness,
  ack,
  disconnected,
  dispatchedJob,
  expiry,
  granted,
  intent,
  jobInput,
  jobPlan,
  need,
  reclaim,
  reject,
  startJob,
  status,
  stepJob,
  stepsJob,
  types,
} from '../../support/machines.ts';

const HOUR = 60 * 60_000;

describe('bug classes (spec/bug-classes.md)', () => {
  it('B1: a terminal status right after dispatch finishes the run (status before the run exists)', () => {
    const h = RunHarness.start([jobPlan('a')]);
    assert.equal(h.snapshot.status, 'active', 'the run exists before anything is dispatched');
    h.dispatch('a', 10);
    assert.ok(h.take().some((i) => i.by === 'a' && i.type === 'sendDispatch'), 'the dispatch is recorded by the existing run');
    h.fromOwner('a', (o) => status('success', 11, o));
    assert.equal(h.jobState('a'), 'success');
    assert.equal(h.snapshot.value, 'success');
    assert.equal(h.snapshot.status, 'done');
  });

  it('B2: ack, running and terminal status back to back in one mailbox → run final, never stuck running', () => {
    const h = RunHarness.start([jobPlan('a'), jobPlan('b', { needs: [need('a')] })]);
    h.onIntent = (recorded) => {
      if (recorded.type !== 'sendDispatch') return;
      const { agentId, dispatchId, jobKey } = recorded.params as { agentId: string; dispatchId: string; jobKey: string };
      const owner = { agentId, dispatchId };
      // The agent answers before the run has finished processing the placement: all three queue up.
      for (const event of [ack(20, owner), status('running', 20, owner), status('success', 20, owner)]) h.send({ ...event, jobKey });
    };
    h.dispatch('a', 20);
    assert.deepEqual(h.jobStates(), { a: 'success', b: 'queued' });
    h.dispatch('b', 30);
    assert.deepEqual(h.jobStates(), { a: 'success', b: 'success' });
    assert.equal(h.snapshot.value, 'success');
  });

  it('B4: after the job and run are failed, a late running/success status, reclaim or ack does not revive them', () => {
    const h = RunHarness.start([jobPlan('a')]);
    const owner = h.dispatch('a', 10);
    h.fromOwner('a', (o) => status('running', 11, o));
    h.send({ ...disconnected(12, owner.agentId), jobKey: 'a' });
    h.expire('a', 'recovery');
    assert.equal(h.jobState('a'), 'failed');
    assert.equal(h.snapshot.value, 'failed');
    const failed = { run: h.snapshot.context, job: h.child('a').context };
    h.take();
    for (const event of [status('running', 300_000, owner), status('success', 300_001, owner), reclaim(300_002, owner), ack(300_003, owner)]) {
      h.send({ ...event, jobKey: 'a' });
    }
    assert.equal(h.jobState('a'), 'failed');
    assert.equal(h.snapshot.value, 'failed');
    assert.deepEqual(h.snapshot.context, failed.run);
    assert.deepEqual(h.child('a').context, failed.job);
    assert.deepEqual(h.take(), []);

    // The job alone, as a pure transition, is equally final.
    const [recovering] = stepsJob(dispatchedJob(), [status('running', 3_000), disconnected(4_000)]);
    const [dead] = stepJob(recovering, expiry(recovering, 'recovery'));
    for (const event of [reclaim(200_000), status('success', 200_000), ack(200_000)]) {
      const [same, intents] = stepJob(dead, event);
      assert.equal(same.value, 'failed');
      assert.deepEqual(intents, []);
    }
  });

  it('B7: ack timeout and reject for the same attempt → one requeue, attempt +1 once; a stale ack firing after running is ignored', () => {
    const dispatched = dispatchedJob();
    const ackFiring = expiry(dispatched, 'ack');
    const orders: JobEvent[][] = [
      [ackFiring, reject(ackFiring.at + 1)],
      [reject(ackFiring.at - 1), ackFiring],
    ];
    for (const order of orders) {
      const [queued, intents] = stepsJob(dispatched, order);
      assert.equal(queued.value, 'queued');
      assert.equal(queued.context.attempt, 1);
      assert.equal(types(intents).filter((t) => t === 'requestPlacement').length, 1, 'exactly one requeue');
      assert.equal(types(intents).filter((t) => t === 'releaseSlot').length, 1, 'the slot is released once');
      const [again] = stepJob(queued, granted(20_000, { agentId: 'agent-2', dispatchId: 'dispatch-2' }));
      assert.equal(again.context.attempt, 2);
    }

    const [running] = stepsJob(dispatched, [ack(2_100), status('running', 2_200)]);
    const [same, intents] = stepJob(running, ackFiring);
    assert.deepEqual(same.value, { assigned: { running: 'started' } });
    assert.deepEqual(same.context, running.context);
    assert.deepEqual(intents, []);
  });

  it('B9: staleness is measured from the job’s own liveness, not from the enqueue time', () => {
    const [queued] = startJob(jobInput({ createdAt: 0 }));
    const enqueueFiring = expiry(queued, 'queue');
    const waitedLong = 50 * 60_000;
    const reason = { kind: 'scaler_spawning' as const, message: 'spawning agent on k8s' };
    const [dispatched, intents] = stepsJob(queued, [{ type: 'placement.none', reason, at: 60_000 }, granted(waitedLong)]);
    assert.deepEqual(intents, [intent.disarm('queue'), intent.arm('ack', waitedLong + 10_000), intent.dispatch(1)]);
    assert.deepEqual(Object.keys(dispatched.context.deadlines), ['ack'], 'dispatched is watched by the ack deadline only');
    const [running] = stepJob(dispatched, ack(waitedLong + 1_000));
    assert.deepEqual(running.context.deadlines, { lease: { id: 'build#lease', at: waitedLong + 1_000 + 120_000 } });
    const [same, none] = stepJob(running, { ...enqueueFiring, at: waitedLong + 2_000 });
    assert.deepEqual(same.value, { assigned: { running: 'accepted' } });
    assert.deepEqual(none, []);
  });

  it('B10: cancel with queued roots and needs-gated downstream → every job cancelled, the run reaches cancelled', () => {
    const plans = [
      jobPlan('a'),
      jobPlan('b'),
      jobPlan('c', { needs: [need('a')] }),
      jobPlan('d', { needs: [need('c'), need('b')] }),
    ];
    const h = RunHarness.start(plans).watchDag7();
    h.send({ type: 'run.cancel', reason: 'cancelled by admin', force: false, by: 'admin', at: 100 });
    assert.deepEqual(h.jobStates(), { a: 'cancelled', b: 'cancelled', c: 'cancelled', d: 'cancelled' });
    assert.equal(h.snapshot.value, 'cancelled');
    assert.deepEqual(
      Object.values(h.snapshot.context.jobs).map((node) => node.status),
      ['cancelled', 'cancelled', 'cancelled', 'cancelled'],
    );

    const deadline = RunHarness.start(plans, { workflowTimeoutMs: 1_000 }).watchDag7();
    deadline.send({ type: 'timer.workflow.expired', deadlineId: 'run#workflow', dueAt: 1_000, at: 1_000 });
    assert.deepEqual(Object.values(deadline.jobStates()), ['cancelled', 'cancelled', 'cancelled', 'cancelled']);
    assert.equal(deadline.snapshot.value, 'failed', 'the deadline path ends the run too');
  });

  it('B11: concurrency policy is read from the job’s frozen input, never a default', () => {
    const frozen = { key: 'acme/app::deploy', policy: { cancelInProgress: false, max: 3 } };
    const h = RunHarness.start([jobPlan('deploy', { concurrency: frozen }), jobPlan('lint')]);
    const requests = h.take().filter((i) => i.type === 'requestConcurrency');
    assert.deepEqual(requests, [{ by: 'deploy', type: 'requestConcurrency', params: { jobKey: 'deploy', ...frozen } }]);

    const restored = h.restore();
    assert.deepEqual(restored.child('deploy').context.concurrency, frozen, 'the policy survives a restore');
    assert.equal(restored.child('lint').context.concurrency, null, 'no group is invented for a job without one');
    restored.send({ type: 'concurrency.granted', jobKey: 'deploy', at: 50 });
    assert.equal(restored.jobState('deploy'), 'queued');
  });

  it('B12: a requeued job with no agent still has a queue deadline and ends final when it fires', () => {
    const [queued, intents] = stepJob(dispatchedJob(), reject(3_000));
    assert.deepEqual(intents.filter((i) => i.type === 'armDeadline'), [intent.arm('queue', 3_000 + HOUR)]);
    const reason = { kind: 'no_matching_agent' as const, message: 'no agent has the labels arm64' };
    const [waiting] = stepJob(queued, { type: 'placement.none', reason, at: 4_000 });
    assert.deepEqual(waiting.context.deadlines.queue, { id: 'build#queue', at: 3_000 + HOUR });
    const [ended] = stepJob(waiting, expiry(waiting, 'queue'));
    assert.equal(ended.value, 'timed_out_stale');
    assert.equal(ended.status, 'done');

    const h = RunHarness.start([jobPlan('a')]);
    h.dispatch('a', 10);
    h.fromOwner('a', (o) => reject(11, o));
    h.send({ type: 'placement.none', jobKey: 'a', reason, at: 12 });
    h.expire('a', 'queue');
    assert.equal(h.jobState('a'), 'timed_out_stale');
    assert.equal(h.snapshot.value, 'failed');
  });

  it('B8: an init job in flight is a persisted job, not a pending promise: after a restore its result still fans out its target', () => {
    const flags = { dynamicEnvironment: false, dynamicEnv: false, dynamicConcurrencyGroup: false, dynamicMatrix: true };
    const h = RunHarness.start([
      jobPlan('__init__ci__test', { initFor: { targetJobName: 'test', flags } }),
      jobPlan('test', { initJob: '__init__ci__test', template: true }),
      jobPlan('after', { needs: [need('test')] }),
    ]);
    h.dispatch('__init__ci__test', 10);
    h.fromOwner('__init__ci__test', (o) => status('running', 11, o));
    const restored = h.restore().watchDag7();
    assert.equal(restored.jobState('__init__ci__test'), 'assigned.running.started');
    assert.ok(restored.child('__init__ci__test').context.deadlines.lease, 'the lease deadline is in the snapshot, to be re-armed');
    restored.fromOwner('__init__ci__test', (o) => ({ ...status('success', 12, o), data: { initResult: { matrixValues: [{ v: '1' }] } } }) as JobEvent);
    assert.equal(restored.jobState('test (1)'), 'queued');
    restored.runToEnd('test (1)', 'success', 20);
    restored.runToEnd('after', 'success', 30);
    assert.equal(restored.snapshot.value, 'success');
  });
});
