import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { InitFailure } from '../../../machines/types.ts';
import type { RunEvent } from '../../../machines/run.machine.ts';
import { RUN_ON, RunHarness, ack, heartbeat, jobPlan, need, status } from '../../support/machines.ts';

const DAY = 24 * 60 * 60_000;
const APPROVAL = { id: 'run#approval', at: 3_600_000 };
const approvalGate = { kind: 'approval', message: 'waiting for workflow approval' };

function heldRun(workflowTimeoutMs: number | null = null): RunHarness {
  const plans = [jobPlan('a'), jobPlan('b', { needs: [need('a')] })];
  return RunHarness.start(plans, { approval: { timeoutMs: APPROVAL.at }, workflowTimeoutMs }).watchDag7();
}

describe('run machine: approval hold', () => {
  it('held: every job waits with reason approval, nothing is placed, the approval deadline is armed', () => {
    const h = heldRun();
    assert.deepEqual(h.snapshot.value, { active: 'held' });
    assert.deepEqual(h.jobStates(), { a: 'waiting.gated', b: 'waiting.gated' });
    assert.deepEqual(h.child('a').context.waiting, approvalGate);
    assert.deepEqual(h.take(), [{ by: 'run', type: 'armDeadline', params: { id: APPROVAL.id, kind: 'approval', at: APPROVAL.at } }]);
  });

  it('approved → pending: roots are released, downstream waits on needs, the deadline is disarmed', () => {
    const h = heldRun();
    h.take();
    h.send({ type: 'run.approval', decision: 'approved', by: 'alice', at: 500 });
    assert.deepEqual(h.snapshot.value, { active: 'pending' });
    assert.deepEqual(h.jobStates(), { a: 'queued', b: 'waiting.gated' });
    assert.deepEqual(h.child('b').context.waiting, { kind: 'needs', message: 'waiting for upstream jobs: a' });
    const intents = h.take();
    assert.deepEqual(intents[0], { by: 'run', type: 'disarmDeadline', params: { id: APPROVAL.id, jobKey: null } });
    assert.deepEqual(
      intents.filter((i) => i.type === 'requestPlacement').map((i) => i.by),
      ['a'],
    );
    h.runToEnd('a', 'success', 600);
    h.runToEnd('b', 'success', 700);
    assert.equal(h.snapshot.value, 'success');
  });

  it('rejected → every job cancelled → run cancelled', () => {
    const h = heldRun();
    h.send({ type: 'run.approval', decision: 'rejected', by: 'bob', at: 500 });
    assert.deepEqual(h.jobStates(), { a: 'cancelled', b: 'cancelled' });
    assert.equal(h.snapshot.value, 'cancelled');
    assert.equal(h.child('a').context.outcome, 'approval rejected');
  });

  it('expiry → every job cancelled → run cancelled; a stale firing is ignored', () => {
    const h = heldRun();
    h.send({ type: 'timer.approval.expired', deadlineId: APPROVAL.id, dueAt: 7, at: 7 });
    assert.deepEqual(h.snapshot.value, { active: 'held' });
    h.send({ type: 'timer.approval.expired', deadlineId: APPROVAL.id, dueAt: APPROVAL.at, at: APPROVAL.at });
    assert.equal(h.snapshot.value, 'cancelled');
    assert.equal(h.child('b').context.outcome, 'approval expired');
  });

  it('an approval without timeoutSeconds waits 24 h', () => {
    const h = RunHarness.start([jobPlan('a')], { approval: { timeoutMs: 0 }, createdAt: 100 });
    assert.deepEqual(h.snapshot.context.deadlines.approval, { id: APPROVAL.id, at: 100 + DAY });
  });

  it('run.cancel while held cancels every job', () => {
    const h = heldRun();
    h.send({ type: 'run.cancel', reason: 'stop', force: false, by: 'alice', at: 500 });
    assert.equal(h.snapshot.value, 'cancelled');
  });

  it('the workflow deadline also runs while held: it cancels the jobs and fails the run (TMO-1)', () => {
    const h = heldRun(60_000);
    h.send({ type: 'timer.workflow.expired', deadlineId: 'run#workflow', dueAt: 60_000, at: 60_000 });
    assert.deepEqual(h.jobStates(), { a: 'cancelled', b: 'cancelled' });
    assert.equal(h.snapshot.value, 'failed');
    assert.equal(h.snapshot.context.failureReason, 'workflow_timeout');
  });

  it('a job that ends while the run is held is counted when the run goes on', () => {
    const h = heldRun();
    h.send({ type: 'job.cancel.requested', jobKey: 'b', force: false, reason: 'superseded', at: 400 });
    assert.equal(h.jobState('b'), 'cancelled');
    h.send({ type: 'run.approval', decision: 'approved', by: 'alice', at: 500 });
    h.runToEnd('a', 'success', 600);
    assert.equal(h.snapshot.value, 'cancelled');
  });
});

describe('run machine: init failures (§13)', () => {
  const runFailure: InitFailure = { scope: 'run', category: 'secret_resolution', message: 'secret NPM_TOKEN not found' };

  it('run scope: the run is failed at once, every job failed, no placement requested', () => {
    const plans = [jobPlan('a'), jobPlan('b', { needs: [need('a')] })];
    const h = RunHarness.start(plans, { initFailure: runFailure, workflowTimeoutMs: 60_000 });
    assert.equal(h.snapshot.value, 'failed');
    assert.equal(h.snapshot.status, 'done');
    assert.equal(h.snapshot.context.failureReason, 'secret NPM_TOKEN not found');
    assert.deepEqual(h.snapshot.context.initFailure, runFailure);
    assert.deepEqual(
      Object.values(h.snapshot.context.jobs).map((node) => node.status),
      ['failed', 'failed'],
    );
    assert.deepEqual(h.take(), [], 'no deadline, no placement, no dispatch');
  });

  it('job scope: only that job fails, never placed; downstream follows runOn', () => {
    const failure: InitFailure = { scope: 'job', category: 'matrix_expansion', message: 'zero combinations', jobName: 'a' };
    const h = RunHarness.start([
      jobPlan('a', { initFailure: failure }),
      jobPlan('b', { needs: [need('a')] }),
      jobPlan('c', { needs: [need('a', RUN_ON.always)] }),
      jobPlan('d'),
    ]).watchDag7();
    assert.deepEqual(h.jobStates(), { a: 'failed', b: 'skipped', c: 'queued', d: 'queued' });
    assert.deepEqual(h.child('a').context.initFailure, failure);
    assert.ok(!h.take().some((i) => i.by === 'a'), 'a records nothing');
    h.runToEnd('c', 'success', 10);
    h.runToEnd('d', 'success', 20);
    assert.equal(h.snapshot.value, 'failed');
    assert.equal(h.snapshot.context.failureReason, 'Failed jobs: a');
  });
});

describe('run machine: terminal is final', () => {
  it('events after the run is done change nothing and record nothing', () => {
    const h = RunHarness.start([jobPlan('a')], { workflowTimeoutMs: 60_000 });
    h.runToEnd('a', 'success', 10);
    const done = h.snapshot;
    assert.equal(done.value, 'success');
    h.take();
    const owner = { agentId: 'agent-a', dispatchId: 'dispatch-1' };
    const late: RunEvent[] = [
      { type: 'run.cancel', reason: 'stop', force: true, by: 'alice', at: 100 },
      { type: 'run.approval', decision: 'rejected', by: 'bob', at: 100 },
      { type: 'timer.workflow.expired', deadlineId: 'run#workflow', dueAt: 60_000, at: 60_000 },
      { type: 'job.finished', jobKey: 'a', status: 'failed', reason: 'late', at: 100 },
      { ...status('failed', 100, owner), jobKey: 'a' },
      { type: 'job.cancel.requested', jobKey: 'a', force: true, reason: 'late', at: 100 },
    ];
    for (const event of late) h.send(event);
    assert.equal(h.snapshot.value, 'success');
    assert.deepEqual(h.snapshot.context, done.context);
    assert.equal(h.jobState('a'), 'success');
    assert.deepEqual(h.take(), []);
  });
});

describe('run machine: persistence round trip', () => {
  it('a persisted, JSON-serialized snapshot restores the children and their deadlines and continues', () => {
    const h = RunHarness.start([jobPlan('a'), jobPlan('b', { needs: [need('a')] })], { workflowTimeoutMs: 600_000 });
    h.dispatch('a', 10);
    h.fromOwner('a', (o) => ack(11, o));
    h.fromOwner('a', (o) => status('running', 12, o));
    const before = { run: h.snapshot.context, a: h.child('a').context, b: h.child('b').context };

    const restored = h.restore().watchDag7();
    assert.deepEqual(restored.snapshot.value, { active: 'running' });
    assert.deepEqual(restored.jobStates(), { a: 'assigned.running.started', b: 'waiting.gated' });
    assert.deepEqual(restored.snapshot.context, before.run);
    assert.deepEqual(restored.child('a').context, before.a);
    assert.deepEqual(restored.child('b').context, before.b);
    assert.deepEqual(restored.child('a').context.deadlines.lease, { id: 'a#lease', at: 12 + 120_000 });
    assert.deepEqual(restored.snapshot.context.deadlines.workflow, { id: 'run#workflow', at: 600_000 });

    restored.fromOwner('a', (o) => heartbeat(50_000, o));
    restored.expire('a', 'lease', 50_000 + 120_000);
    assert.equal(restored.jobState('a'), 'timed_out_stale', 'a restored deadline still fires by id and dueAt');
    assert.equal(restored.jobState('b'), 'skipped', 'the restored child reported to the restored run');
    assert.equal(restored.snapshot.value, 'failed');
  });

  it('a restored run goes on to success, and its own deadlines are disarmed at the end', () => {
    const h = RunHarness.start([jobPlan('a'), jobPlan('b', { needs: [need('a')] })], { workflowTimeoutMs: 600_000 });
    h.runToEnd('a', 'success', 10);
    const restored = h.restore();
    assert.equal(restored.jobState('b'), 'queued');
    restored.runToEnd('b', 'success', 20);
    assert.equal(restored.snapshot.value, 'success');
    assert.ok(restored.take().some((i) => i.by === 'run' && i.type === 'disarmDeadline'));
  });

  it('a held run restores held with its approval deadline', () => {
    const restored = heldRun().restore();
    assert.deepEqual(restored.snapshot.value, { active: 'held' });
    restored.send({ type: 'timer.approval.expired', deadlineId: APPROVAL.id, dueAt: APPROVAL.at, at: APPROVAL.at });
    assert.equal(restored.snapshot.value, 'cancelled');
  });
});
