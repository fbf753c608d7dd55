import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { RUN_ON, RunHarness, ack, fanout, jobPlan, need, status } from '../../support/machines.ts';
import type { RecordedIntent } from '../../support/machines.ts';

/** Job keys that asked for placement, in order. */
function placed(intents: readonly RecordedIntent[]): string[] {
  return intents.filter((i) => i.type === 'requestPlacement').map((i) => i.by);
}

describe('run machine: needs DAG', () => {
  it('a → b: b waits naming a, is released when a succeeds, and the run ends success', () => {
    const h = RunHarness.start([jobPlan('a'), jobPlan('b', { needs: [need('a')] })]).watchDag7();
    assert.deepEqual(h.snapshot.value, { active: 'pending' });
    assert.deepEqual(h.jobStates(), { a: 'queued', b: 'waiting.gated' });
    assert.deepEqual(h.child('b').context.waiting, { kind: 'needs', message: 'waiting for upstream jobs: a' });
    assert.deepEqual(placed(h.take()), ['a']);

    h.dispatch('a', 10);
    h.fromOwner('a', (o) => ack(11, o));
    assert.deepEqual(h.snapshot.value, { active: 'pending' });
    h.fromOwner('a', (o) => status('running', 12, o));
    assert.deepEqual(h.snapshot.value, { active: 'running' });
    assert.equal(h.snapshot.context.startedAt, 12);
    h.fromOwner('a', (o) => status('success', 13, o));
    assert.deepEqual(h.jobStates(), { a: 'success', b: 'queued' });
    assert.deepEqual(placed(h.take()), ['b']);

    h.runToEnd('b', 'success', 20);
    assert.equal(h.snapshot.value, 'success');
    assert.equal(h.snapshot.status, 'done');
    assert.equal(h.snapshot.context.failureReason, null);
    assert.equal(h.snapshot.context.finishedAt, 23);
  });

  it('runOn always: the downstream runs after a failed upstream', () => {
    const h = RunHarness.start([jobPlan('a'), jobPlan('report', { needs: [need('a', RUN_ON.always)] })]).watchDag7();
    h.runToEnd('a', 'failed', 10);
    assert.equal(h.jobState('report'), 'queued');
    h.runToEnd('report', 'success', 20);
    assert.equal(h.snapshot.value, 'failed');
    assert.equal(h.snapshot.context.failureReason, 'Failed jobs: a');
  });

  it('runOn on-failure: skipped after a success, released after a failure or a stale timeout', () => {
    const ok = RunHarness.start([jobPlan('a'), jobPlan('rollback', { needs: [need('a', RUN_ON.failure)] })]).watchDag7();
    ok.runToEnd('a', 'success', 10);
    assert.equal(ok.jobState('rollback'), 'skipped');
    assert.match(ok.child('rollback').context.outcome ?? '', /upstream a ended success/);
    assert.equal(ok.snapshot.value, 'success');

    const bad = RunHarness.start([jobPlan('a'), jobPlan('rollback', { needs: [need('a', RUN_ON.failure)] })]).watchDag7();
    bad.dispatch('a', 10);
    bad.fromOwner('a', (o) => status('running', 11, o));
    bad.expire('a', 'lease');
    assert.equal(bad.jobState('a'), 'timed_out_stale');
    assert.equal(bad.jobState('rollback'), 'queued');
  });

  it('runOn on-skip: released when the upstream was skipped, skipped when it failed', () => {
    const plans = [
      jobPlan('lint'),
      jobPlan('build', { needs: [need('lint')] }),
      jobPlan('notify', { needs: [need('build', RUN_ON.skip)] }),
    ];
    const h = RunHarness.start(plans).watchDag7();
    h.runToEnd('lint', 'failed', 10);
    assert.deepEqual(h.jobStates(), { lint: 'failed', build: 'skipped', notify: 'queued' });

    const failed = RunHarness.start(plans).watchDag7();
    failed.runToEnd('lint', 'success', 10);
    failed.runToEnd('build', 'failed', 20);
    assert.equal(failed.jobState('notify'), 'skipped');
    assert.equal(failed.snapshot.value, 'failed');
  });

  it('the skip cascade runs through several levels and stops at an edge that accepts skipped', () => {
    const h = RunHarness.start([
      jobPlan('a'),
      jobPlan('b', { needs: [need('a')] }),
      jobPlan('c', { needs: [need('b')] }),
      jobPlan('d', { needs: [need('c'), need('a', RUN_ON.always)] }),
      jobPlan('e', { needs: [need('d', RUN_ON.always)] }),
    ]).watchDag7();
    h.runToEnd('a', 'failed', 10);
    assert.deepEqual(h.jobStates(), { a: 'failed', b: 'skipped', c: 'skipped', d: 'skipped', e: 'queued' });
    assert.match(h.child('d').context.outcome ?? '', /^upstream c ended skipped/);
    h.runToEnd('e', 'success', 20);
    assert.equal(h.snapshot.value, 'failed');
    assert.equal(h.snapshot.context.failureReason, 'Failed jobs: a');
  });

  it('DAG-3: a need on a fan-out waits for every child and uses the aggregate status', () => {
    const plans = [...fanout('test', 3), jobPlan('deploy', { needs: [need('test')] }), jobPlan('triage', { needs: [need('test', RUN_ON.failure)] })];
    const h = RunHarness.start(plans).watchDag7();
    h.runToEnd('test (0)', 'success', 10);
    h.runToEnd('test (2)', 'success', 20);
    assert.equal(h.jobState('deploy'), 'waiting.gated', 'one child is still open');
    h.runToEnd('test (1)', 'failed', 30);
    assert.equal(h.jobState('deploy'), 'skipped');
    assert.equal(h.jobState('triage'), 'queued');
    assert.match(h.child('deploy').context.outcome ?? '', /upstream test ended failed/);
  });

  it('DAG-3: a fan-out whose children all succeed releases the downstream once', () => {
    const h = RunHarness.start([...fanout('test', 2), jobPlan('deploy', { needs: [need('test')] })]).watchDag7();
    h.runToEnd('test (0)', 'success', 10);
    h.runToEnd('test (1)', 'success', 20);
    assert.equal(h.jobState('deploy'), 'queued');
    assert.deepEqual(
      placed(h.take()).filter((k) => k === 'deploy'),
      ['deploy'],
    );
  });
});

describe('run machine: waves', () => {
  it('maxParallel 2 over 5 children: released in fanoutIndex order, each terminal child releasing the next', () => {
    const h = RunHarness.start(fanout('shard', 5, { maxParallel: 2 })).watchDag7();
    assert.deepEqual(placed(h.take()), ['shard (0)', 'shard (1)']);
    assert.deepEqual(h.child('shard (4)').context.waiting, {
      kind: 'wave',
      message: 'waiting for a free place in the fan-out window of shard (maxParallel 2)',
    });
    h.runToEnd('shard (1)', 'success', 10);
    assert.deepEqual(placed(h.take()), ['shard (2)']);
    h.runToEnd('shard (0)', 'failed', 20);
    assert.deepEqual(placed(h.take()), ['shard (3)']);
    h.runToEnd('shard (3)', 'success', 30);
    assert.deepEqual(placed(h.take()), ['shard (4)']);
    h.runToEnd('shard (2)', 'success', 40);
    h.runToEnd('shard (4)', 'success', 50);
    assert.deepEqual(placed(h.take()), []);
    assert.equal(h.snapshot.value, 'failed');
  });

  it('failFast: skips the children not yet dispatched; a dispatched child runs to completion', () => {
    const h = RunHarness.start(fanout('shard', 5, { maxParallel: 3, failFast: true })).watchDag7();
    h.dispatch('shard (0)', 10);
    h.fromOwner('shard (0)', (o) => status('running', 11, o));
    h.runToEnd('shard (1)', 'failed', 20);
    assert.deepEqual(h.jobStates(), {
      'shard (0)': 'assigned.running.started',
      'shard (1)': 'failed',
      'shard (2)': 'skipped',
      'shard (3)': 'skipped',
      'shard (4)': 'skipped',
    });
    assert.deepEqual(h.snapshot.value, { active: 'running' });
    h.fromOwner('shard (0)', (o) => status('success', 30, o));
    assert.equal(h.jobState('shard (0)'), 'success');
    assert.equal(h.snapshot.value, 'failed');
    assert.equal(h.snapshot.context.failureReason, 'Failed jobs: shard (1)');
  });

  it('without failFast a failed child does not stop its siblings', () => {
    const h = RunHarness.start(fanout('shard', 3, { maxParallel: 1 })).watchDag7();
    h.runToEnd('shard (0)', 'failed', 10);
    assert.equal(h.jobState('shard (1)'), 'queued');
  });

  it('an evaluation leaves the snapshot before it as it was: nodes released or skipped and a halted group are copies', () => {
    const h = RunHarness.start([...fanout('shard', 4, { maxParallel: 2, failFast: true }), jobPlan('deploy', { needs: [need('shard')] })]).watchDag7();
    const before = h.snapshot;
    const stored = JSON.stringify({ jobs: before.context.jobs, groups: before.context.groups });
    h.runToEnd('shard (0)', 'failed', 10);
    assert.equal(h.jobState('shard (2)'), 'skipped');
    assert.equal(h.snapshot.context.groups['shard']?.halted, true);
    assert.equal(JSON.stringify({ jobs: before.context.jobs, groups: before.context.groups }), stored);
  });
});
