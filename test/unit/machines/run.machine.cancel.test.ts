import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { computeRunStatus } from '../../../machines/status.ts';
import type { TerminalJobStatus } from '../../../machines/status.ts';
import { RunHarness, ack, jobPlan, need, status, stepStatus } from '../../support/machines.ts';
import type { RecordedIntent } from '../../support/machines.ts';

const WORKFLOW = { id: 'run#workflow', at: 60_000 };

/** a running, b queued, c waiting on a's needs. */
function mixedRun(workflowTimeoutMs: number | null = null): RunHarness {
  const h = RunHarness.start([jobPlan('a'), jobPlan('b'), jobPlan('c', { needs: [need('a')] })], { workflowTimeoutMs }).watchDag7();
  h.dispatch('a', 10);
  h.fromOwner('a', (o) => ack(11, o));
  h.fromOwner('a', (o) => status('running', 12, o));
  h.take();
  return h;
}

function cancels(intents: readonly RecordedIntent[]): Array<[string, unknown]> {
  return intents.filter((i) => i.type === 'sendCancel').map((i) => [i.by, i.params]);
}

describe('run machine: run.cancel', () => {
  it('graceful: queued and needs-gated jobs are cancelled (not skipped), the running job is asked to stop', () => {
    const h = mixedRun();
    h.fromOwner('a', (o) => stepStatus(90, o));
    h.send({ type: 'run.cancel', reason: 'cancelled by alice', force: false, by: 'alice', at: 100 });
    assert.equal(h.snapshot.value, 'cancelling');
    assert.deepEqual(h.jobStates(), { a: 'assigned.cancelling', b: 'cancelled', c: 'cancelled' });
    const intents = h.take();
    assert.deepEqual(cancels(intents), [
      ['a', { jobKey: 'a', agentId: 'agent-a', dispatchId: 'dispatch-1', force: false, reason: 'cancelled by alice' }],
    ]);
    assert.ok(!intents.some((i) => i.type === 'requestPlacement'), 'nothing is placed while cancelling');
    h.fromOwner('a', (o) => status('cancelled', 120, o));
    assert.equal(h.snapshot.value, 'cancelled');
    // Regression: the reason was in neither, and the step the agent never reported ended stayed `running`.
    assert.equal(h.snapshot.context.failureReason, 'Cancelled: cancelled by alice');
    assert.equal(h.child('a').context.outcome, 'cancelled by alice', 'the agent’s cancelled report keeps the cancel’s reason');
    assert.deepEqual(h.child('a').context.steps.map((s) => [s.name, s.status]), [['build', 'cancelled']]);
  });

  it('force: the running job is force-cancelled and the run is cancelled at once', () => {
    const h = mixedRun();
    h.send({ type: 'run.cancel', reason: 'cancelled by alice', force: true, by: 'alice', at: 100 });
    assert.equal(h.snapshot.value, 'cancelled');
    assert.deepEqual(h.jobStates(), { a: 'cancelled', b: 'cancelled', c: 'cancelled' });
    assert.deepEqual(cancels(h.take()), [['a', { jobKey: 'a', agentId: 'agent-a', dispatchId: 'dispatch-1', force: true, reason: 'cancelled' }]]);
  });

  it('a status arriving after a force cancel is ignored (CAN-2)', () => {
    const h = mixedRun();
    const owner = h.child('a').context.assignment;
    assert.ok(owner);
    h.send({ type: 'run.cancel', reason: 'stop', force: true, by: 'alice', at: 100 });
    h.send({ ...status('success', 101, owner), jobKey: 'a' });
    assert.equal(h.jobState('a'), 'cancelled');
    assert.equal(h.snapshot.value, 'cancelled');
  });

  it('graceful then force escalates the job still cancelling', () => {
    const h = mixedRun();
    h.send({ type: 'run.cancel', reason: 'stop', force: false, by: 'alice', at: 100 });
    h.send({ type: 'run.cancel', reason: 'stop now', force: false, by: 'alice', at: 101 });
    assert.equal(h.snapshot.value, 'cancelling', 'a second graceful cancel changes nothing');
    h.send({ type: 'run.cancel', reason: 'stop now', force: true, by: 'alice', at: 102 });
    assert.equal(h.jobState('a'), 'cancelled');
    assert.equal(h.snapshot.value, 'cancelled');
  });

  it('the job cancel deadline ends a job whose agent never answers, and then the run', () => {
    const h = mixedRun();
    h.send({ type: 'run.cancel', reason: 'stop', force: false, by: 'alice', at: 100 });
    h.expire('a', 'cancel');
    assert.equal(h.jobState('a'), 'cancelled');
    assert.equal(h.snapshot.value, 'cancelled');
  });

  it('cancelling a pending run with a dispatched job force-cancels the dispatch', () => {
    const h = RunHarness.start([jobPlan('a')]);
    h.dispatch('a', 10);
    h.take();
    h.send({ type: 'run.cancel', reason: 'stop', force: false, by: 'alice', at: 20 });
    assert.equal(h.snapshot.value, 'cancelled');
    assert.deepEqual(cancels(h.take()), [['a', { jobKey: 'a', agentId: 'agent-a', dispatchId: 'dispatch-1', force: true, reason: 'cancelled' }]]);
  });
});

describe('run machine: workflow deadline (TMO-1)', () => {
  it('is armed at creation for createdAt + timeout', () => {
    const h = RunHarness.start([jobPlan('a')], { createdAt: 5_000, workflowTimeoutMs: 60_000 });
    const run = h.take().filter((i) => i.by === 'run');
    assert.deepEqual(run, [{ by: 'run', type: 'armDeadline', params: { id: 'run#workflow', kind: 'workflow', at: 65_000 } }]);
    assert.deepEqual(h.snapshot.context.deadlines.workflow, { id: 'run#workflow', at: 65_000 });
  });

  it('fires → every job cancelled gracefully → the run ends failed with failureReason workflow_timeout', () => {
    const h = mixedRun(60_000);
    h.send({ type: 'timer.workflow.expired', deadlineId: WORKFLOW.id, dueAt: WORKFLOW.at, at: 60_000 });
    assert.equal(h.snapshot.value, 'cancelling');
    assert.deepEqual(h.jobStates(), { a: 'assigned.cancelling', b: 'cancelled', c: 'cancelled' });
    assert.deepEqual(cancels(h.take()), [
      ['a', { jobKey: 'a', agentId: 'agent-a', dispatchId: 'dispatch-1', force: false, reason: 'workflow_timeout' }],
    ]);
    h.fromOwner('a', (o) => status('cancelled', 61_000, o));
    assert.equal(h.snapshot.value, 'failed');
    assert.equal(h.snapshot.context.failureReason, 'workflow_timeout');
    assert.equal(h.snapshot.context.workflowTimedOut, true);
  });

  it('a firing that is not the armed deadline is ignored', () => {
    const h = mixedRun(60_000);
    h.send({ type: 'timer.workflow.expired', deadlineId: WORKFLOW.id, dueAt: 1, at: 60_000 });
    h.send({ type: 'timer.workflow.expired', deadlineId: 'run#other', dueAt: WORKFLOW.at, at: 60_000 });
    assert.deepEqual(h.snapshot.value, { active: 'running' });
  });

  it('is disarmed when the run ends', () => {
    const h = RunHarness.start([jobPlan('a')], { workflowTimeoutMs: 60_000 });
    h.runToEnd('a', 'success', 10);
    assert.equal(h.snapshot.value, 'success');
    const run = h.take().filter((i) => i.by === 'run');
    assert.deepEqual(run, [
      { by: 'run', type: 'armDeadline', params: { id: 'run#workflow', kind: 'workflow', at: 60_000 } },
      { by: 'run', type: 'disarmDeadline', params: { id: 'run#workflow', jobKey: null } },
    ]);
    assert.deepEqual(h.snapshot.context.deadlines, {});
  });
});

describe('run machine: run status (STAT-2)', () => {
  const cases: Array<[TerminalJobStatus[], 'success' | 'failed' | 'cancelled']> = [
    [['success', 'success'], 'success'],
    [['success', 'skipped'], 'success'],
    [['success', 'cancelled'], 'cancelled'],
    [['cancelled', 'failed'], 'failed'],
    [['success', 'timed_out_stale'], 'failed'],
    [['cancelled', 'timed_out_stale'], 'failed'],
    [['success', 'drift_dropped'], 'failed'],
    [[], 'success'],
  ];
  for (const [jobs, expected] of cases) {
    it(`computeRunStatus(${jobs.join(', ') || 'no jobs'}) = ${expected}`, () => {
      assert.equal(computeRunStatus(jobs, { workflowTimedOut: false, initFailed: false }), expected);
    });
  }

  it('a workflow timeout or an init failure makes the run failed whatever its jobs ended as', () => {
    assert.equal(computeRunStatus(['success'], { workflowTimedOut: true, initFailed: false }), 'failed');
    assert.equal(computeRunStatus(['cancelled'], { workflowTimedOut: false, initFailed: true }), 'failed');
  });

  for (const [a, b, expected, reason] of [
    ['failed', 'cancelled', 'failed', 'Failed jobs: a'],
    ['success', 'cancelled', 'cancelled', null],
    ['timed_out_stale', 'success', 'failed', 'Failed jobs: a'],
    ['success', 'success', 'success', null],
  ] as const) {
    it(`end to end: a ${a}, b ${b} → ${expected}`, () => {
      const h = RunHarness.start([jobPlan('a'), jobPlan('b')]);
      for (const [key, end, at] of [['a', a, 10], ['b', b, 20]] as const) {
        if (end === 'cancelled') {
          h.send({ type: 'job.cancel.requested', jobKey: key, force: false, reason: 'superseded', at });
        } else if (end === 'timed_out_stale') {
          h.dispatch(key, at);
          h.fromOwner(key, (o) => status('running', at + 1, o));
          h.expire(key, 'lease');
        } else {
          h.runToEnd(key, end, at);
        }
      }
      assert.equal(h.snapshot.value, expected);
      assert.equal(h.snapshot.context.failureReason, reason);
    });
  }
});
