import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { JobEvent } from '../../../machines/job.events.ts';
import type { StepRecord } from '../../../machines/types.ts';
import {
  OWNER,
  RunHarness,
  STEP,
  T,
  acceptedJob,
  ackTimesOut,
  disconnected,
  dispatchedJob,
  expiry,
  granted,
  intent,
  jobPlan,
  lost,
  startedJob,
  status,
  stepJob,
  stepStatus,
  stepsJob,
} from '../../support/machines.ts';

const step = (fields: Partial<StepRecord>): StepRecord => ({ ...STEP, ...fields });

function terminal(state: 'success' | 'failed', at: number, data: Extract<JobEvent, { type: 'agent.job.status' }>['data'], error?: string): JobEvent {
  return { ...status(state, at, OWNER, error), data } as JobEvent;
}

describe('job machine: step and job results', () => {
  it('step.status updates the step records by index; a terminal report keeps what the running one said', () => {
    const [running] = stepsJob(startedJob(), [
      stepStatus(3_000, OWNER, step({ index: 0, name: 'make', status: 'running' })),
      stepStatus(3_100, OWNER, step({ index: 1, name: 'ship', status: 'running', hook: null })),
      stepStatus(3_200, OWNER, step({ index: 0, name: 'make', status: 'success', durationMs: 12 })),
    ]);
    assert.deepEqual(running.context.steps.map((s) => [s.index, s.name, s.status, s.durationMs]), [
      [0, 'make', 'success', 12],
      [1, 'ship', 'running', null],
    ]);
  });

  it('a step.status from another agent or attempt changes nothing', () => {
    const [running] = stepJob(startedJob(), stepStatus(3_000, { agentId: 'intruder', dispatchId: OWNER.dispatchId }));
    assert.deepEqual(running.context.steps, []);
  });

  it('a failed job keeps durations, exit code and error; its reason is the failed step', () => {
    const [running] = stepJob(startedJob(), stepStatus(3_000, OWNER, step({ index: 0, name: 'fail', status: 'failed', exitCode: 1, error: 'at Object.run (ci.ts:7:11)\n    exit code: 1' })));
    const [failed] = stepJob(running, terminal('failed', 3_100, { durationMs: 713, stepResults: [{ name: 'fail', status: 'failed', durationMs: 8, error: 'exit code: 1' }] }));
    assert.equal(failed.value, 'failed');
    assert.deepEqual(failed.context.result, { durationMs: 713, outputs: null, initResult: null });
    assert.deepEqual(failed.context.steps, [step({ index: 0, name: 'fail', status: 'failed', durationMs: 8, exitCode: 1, error: 'exit code: 1' })]);
    assert.equal(failed.context.outcome, 'step fail failed (exit code 1): exit code: 1');
  });

  it('the agent’s own error wins as the reason; stepResults add steps the agent never reported alone', () => {
    const [failed] = stepJob(startedJob(), terminal('failed', 3_000, { stepResults: [{ name: 'a', status: 'success', durationMs: 1 }, { name: 'b', status: 'failed', durationMs: 2 }] }, 'job_timeout'));
    assert.equal(failed.context.outcome, 'job_timeout');
    assert.deepEqual(failed.context.steps.map((s) => [s.index, s.name, s.status]), [
      [0, 'a', 'success'],
      [1, 'b', 'failed'],
    ]);
  });

  it('a success keeps the outputs and reports them to the run', () => {
    const [done] = stepJob(startedJob(), terminal('success', 3_000, { durationMs: 725, outputs: { make: { version: '1.2.3' } } }));
    assert.equal(done.value, 'success');
    assert.deepEqual(done.context.result?.outputs, { make: { version: '1.2.3' } });
    assert.equal(done.context.outcome, null);
  });

  it('a new attempt starts with no steps and no result', () => {
    const [recorded] = stepJob(dispatchedJob(), stepStatus(2_050, OWNER, step({ status: 'running' })));
    assert.equal(recorded.context.steps.length, 1);
    const [requeued] = ackTimesOut(recorded);
    const [again] = stepJob(requeued, granted(20_000, { agentId: 'agent-2', dispatchId: 'dispatch-2' }));
    assert.deepEqual(again.context.steps, []);
    assert.equal(again.context.result, null);
  });
});

describe('job machine: an agent back without its job (agent.job.lost) gets its replay first', () => {
  it('in recovering, started: it waits for the replay (10 s), and a replayed success ends it green with its steps', () => {
    const [recovering] = stepJob(startedJob(), disconnected(5_000));
    const [unlisted, intents] = stepJob(recovering, lost(6_000));
    assert.deepEqual(unlisted.value, { recovering: 'unlistedAfterStart' });
    assert.deepEqual(intents, [intent.arm('replay', 6_000 + 10_000)]);
    const [stepped] = stepJob(unlisted, stepStatus(6_100, OWNER, step({ status: 'success', exitCode: 0 })));
    const [done, ended] = stepJob(stepped, status('success', 6_200));
    assert.equal(done.value, 'success');
    assert.equal(done.context.steps[0]?.status, 'success', 'the replayed step status is kept');
    assert.ok(ended.some((i) => i.type === 'disarmDeadline' && i.params.id === 'build#replay'));
    assert.ok(ended.some((i) => i.type === 'disarmDeadline' && i.params.id === 'build#recovery'));
  });

  it('in recovering, started: no replay by the deadline fails it, saying the agent reconnected and did not report it', () => {
    const [recovering] = stepJob(startedJob(), disconnected(5_000));
    const [unlisted] = stepJob(recovering, lost(6_000));
    const [failed, intents] = stepJob(unlisted, expiry(unlisted, 'replay'));
    assert.equal(failed.value, 'failed');
    assert.equal(failed.context.outcome, `agent ${OWNER.agentId} reconnected after losing its connection and did not report job build`);
    assert.ok(intents.some((i) => i.type === 'disarmDeadline' && i.params.id === 'build#recovery'));
  });

  it('in recovering, not started: no replay by the deadline requeues it with a new placement request', () => {
    const [recovering] = stepJob(acceptedJob(), disconnected(5_000));
    const [unlisted] = stepJob(recovering, lost(6_000));
    assert.deepEqual(unlisted.value, { recovering: 'unlistedBeforeStart' });
    const [queued, intents] = stepJob(unlisted, expiry(unlisted, 'replay'));
    assert.equal(queued.value, 'queued');
    assert.equal(queued.context.assignment, null);
    assert.equal(queued.context.outcome, `agent ${OWNER.agentId} reconnected after losing its connection and did not report job build before starting it; it is tried again`);
    assert.deepEqual(intents.at(-1), intent.placement(1));
  });

  it('the recovery window ending while it waits for the replay says the same', () => {
    const [recovering] = stepJob(startedJob(), disconnected(5_000));
    const [unlisted] = stepJob(recovering, lost(5_000 + 119_000));
    const [failed] = stepJob(unlisted, expiry(unlisted, 'recovery'));
    assert.equal(failed.value, 'failed');
    assert.match(failed.context.outcome ?? '', /^agent .* reconnected after losing its connection and did not report job build$/);
  });

  it('while assigned (a new socket before the old one was seen to close): started or dispatched, it waits for the replay; another attempt changes nothing', () => {
    const [started] = stepJob(startedJob(), lost(T.running + 10));
    assert.deepEqual(started.value, { recovering: 'unlistedAfterStart' });
    assert.equal(stepJob(started, expiry(started, 'replay'))[0].context.outcome, `agent ${OWNER.agentId} reconnected and did not report job build`);
    assert.deepEqual(stepJob(dispatchedJob(), lost(T.granted + 10))[0].value, { recovering: 'unlistedBeforeStart' });
    const other = stepJob(startedJob(), lost(T.running + 10, { agentId: OWNER.agentId, dispatchId: 'older-attempt' }))[0];
    assert.deepEqual(other.value, { assigned: { running: 'started' } });
  });

  // Regression: a coordinator restart turned a job that finished during the outage red ("agent restarted without the job").
  it('after a coordinator restart, the success the agent kept while the coordinator was down ends the job green', () => {
    const restore: JobEvent = { type: 'job.restored', liveAgents: [], at: 7_000 };
    const [restored] = stepJob(startedJob(), restore);
    assert.deepEqual(restored.value, { recovering: 'afterStart' });
    const [unlisted] = stepJob(restored, lost(8_000));
    assert.equal(stepJob(unlisted, status('success', 8_050))[0].value, 'success');
    const [failed] = stepJob(unlisted, expiry(unlisted, 'replay'));
    assert.equal(failed.context.outcome, `agent ${OWNER.agentId} reconnected after the coordinator restarted and did not report job build`);
  });
});

describe('job machine: a grant that arrives too late gives its slot back', () => {
  it('a job that is already dispatched releases the second grant’s slot; for a job that ended, its run releases it', () => {
    const other = { agentId: 'agent-2', dispatchId: 'dispatch-2' };
    const [still, intents] = stepJob(dispatchedJob(), granted(T.granted + 5, other));
    assert.deepEqual(still.context.assignment, { ...OWNER, agentKind: 'static' });
    assert.deepEqual(intents, [{ type: 'releaseSlot', params: other }]);

    const h = RunHarness.start([jobPlan('a'), jobPlan('b')]);
    h.runToEnd('a', 'success', 5);
    h.take();
    h.send({ ...granted(10, other), jobKey: 'a' });
    assert.deepEqual(h.take(), [{ by: 'run', type: 'releaseSlot', params: other }]);
  });
});
