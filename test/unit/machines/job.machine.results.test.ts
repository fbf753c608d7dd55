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
    const [requeued] = stepJob(recorded, expiry(recorded, 'ack'));
    const [again] = stepJob(requeued, granted(20_000, { agentId: 'agent-2', dispatchId: 'dispatch-2' }));
    assert.deepEqual(again.context.steps, []);
    assert.equal(again.context.result, null);
  });
});

describe('job machine: an agent back without its job (agent.job.lost)', () => {
  it('in recovering: a started job fails at once with the reason, its recovery deadline disarmed', () => {
    const [recovering] = stepJob(startedJob(), disconnected(5_000));
    const [failed, intents] = stepJob(recovering, lost(6_000));
    assert.equal(failed.value, 'failed');
    assert.equal(failed.context.outcome, 'agent restarted without the job');
    assert.ok(intents.some((i) => i.type === 'disarmDeadline' && i.params.id === 'build#recovery'));
  });

  it('in recovering: a job that never started is requeued with a new placement request', () => {
    const [recovering] = stepJob(acceptedJob(), disconnected(5_000));
    const [queued, intents] = stepJob(recovering, lost(6_000));
    assert.equal(queued.value, 'queued');
    assert.equal(queued.context.assignment, null);
    assert.deepEqual(intents.at(-1), intent.placement(1));
  });

  it('while assigned: started → failed, dispatched → requeued; from another attempt it changes nothing', () => {
    assert.equal(stepJob(startedJob(), lost(T.running + 10))[0].value, 'failed');
    assert.equal(stepJob(dispatchedJob(), lost(T.granted + 10))[0].value, 'queued');
    const other = stepJob(startedJob(), lost(T.running + 10, { agentId: OWNER.agentId, dispatchId: 'older-attempt' }))[0];
    assert.deepEqual(other.value, { assigned: { running: 'started' } });
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
