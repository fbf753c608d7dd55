import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { DEFAULT_JOB_TIMEOUTS } from '../../../machines/types.ts';
import {
  OWNER,
  T,
  acceptedJob,
  disconnected,
  disconnectedFrom,
  dispatchedJob,
  expiry,
  heartbeat,
  intent,
  jobInput,
  reclaim,
  reclaimOn,
  startedJob,
  status,
  stepJob,
} from '../../support/machines.ts';

const HOUR = 60 * 60_000;

describe('job machine: static agent loss and recovery', () => {
  it('disconnect while running → recovering: lease disarmed, slot released, recovery deadline armed for 120 s', () => {
    const [recovering, intents] = stepJob(startedJob(), disconnected(5_000));
    assert.deepEqual(recovering.value, { recovering: 'afterStart' });
    assert.deepEqual(recovering.context.assignment, { ...OWNER, agentKind: 'static', recovery: 'disconnect' });
    assert.deepEqual(intents, [intent.disarm('lease'), intent.releaseSlot(), intent.arm('recovery', 5_000 + 120_000)]);
  });

  it('disconnect while dispatched → recovering, the ack deadline disarmed', () => {
    const [recovering, intents] = stepJob(dispatchedJob(), disconnected(3_000));
    assert.deepEqual(recovering.value, { recovering: 'beforeStart' });
    assert.deepEqual(intents, [intent.disarm('ack'), intent.releaseSlot(), intent.arm('recovery', 3_000 + 120_000)]);
  });

  it('reclaim by the same agent and dispatch → running.started when it had started, lease armed from the reclaim', () => {
    const [recovering] = stepJob(startedJob(), disconnected(5_000));
    const [running, intents] = stepJob(recovering, reclaim(8_000));
    assert.deepEqual(running.value, { assigned: { running: 'started' } });
    assert.deepEqual(intents, [intent.disarm('recovery'), intent.arm('lease', 8_000 + 120_000)]);
    const [done] = stepJob(running, status('success', 9_000));
    assert.equal(done.value, 'success');
  });

  it('reclaim of a job that never started → running.accepted', () => {
    const [recovering] = stepJob(acceptedJob(), disconnected(5_000));
    const [running] = stepJob(recovering, reclaim(8_000));
    assert.deepEqual(running.value, { assigned: { running: 'accepted' } });
  });

  it('reclaim by another agent or another dispatch is refused', () => {
    const [recovering] = stepJob(startedJob(), disconnected(5_000));
    for (const owner of [
      { agentId: 'agent-9', dispatchId: OWNER.dispatchId },
      { agentId: OWNER.agentId, dispatchId: 'dispatch-0' },
    ]) {
      const [same, intents] = stepJob(recovering, reclaim(8_000, owner));
      assert.deepEqual(same.value, { recovering: 'afterStart' });
      assert.deepEqual(same.context, recovering.context);
      assert.deepEqual(intents, []);
    }
  });

  it('B5: the disconnect of the socket the agent left, arriving after its reclaim on a new socket, is stale: the job keeps running', () => {
    // A peer's close goes through the run inbox, so it can reach the run after the agent registered elsewhere and reclaimed.
    const [recovering] = stepJob(startedJob(), { type: 'job.restored', liveAgents: [], at: 5_000 });
    const [running] = stepJob(recovering, reclaimOn('socket-b', 6_000));
    assert.equal(running.context.assignment?.connectionId, 'socket-b');
    const [stillRunning, intents] = stepJob(running, disconnectedFrom('socket-a', 6_010));
    assert.deepEqual(stillRunning.value, { assigned: { running: 'started' } });
    assert.deepEqual(intents, []);
    const [lostAgain] = stepJob(stillRunning, disconnectedFrom('socket-b', 7_000));
    assert.deepEqual(lostAgain.value, { recovering: 'afterStart' }, 'the socket that reclaimed it still counts');
  });

  it('B5: a reclaim that reaches a job still running (the agent came back before its old socket’s close) makes that close stale too', () => {
    const [running] = stepJob(startedJob(), reclaimOn('socket-b', 6_000));
    const [stillRunning] = stepJob(running, disconnectedFrom('socket-a', 6_010));
    assert.deepEqual(stillRunning.value, { assigned: { running: 'started' } });
    const [unnamed] = stepJob(stillRunning, disconnected(7_000));
    assert.deepEqual(unnamed.value, { recovering: 'afterStart' }, 'a disconnect that names no socket (journals before sockets were named) still applies');
  });

  it('recovery expiry → failed "agent did not reconnect within the recovery window"', () => {
    const [recovering] = stepJob(startedJob(), disconnected(5_000));
    const [failed, intents] = stepJob(recovering, expiry(recovering, 'recovery'));
    assert.equal(failed.value, 'failed');
    assert.equal(failed.context.outcome, 'agent did not reconnect within the recovery window');
    assert.deepEqual(intents, [intent.disarm('recovery')]);
  });

  it('a recovery firing for an earlier window is ignored', () => {
    const [first] = stepJob(startedJob(), disconnected(5_000));
    const stale = expiry(first, 'recovery');
    const [running] = stepJob(first, reclaim(6_000));
    const [second] = stepJob(running, disconnected(50_000));
    const [same, intents] = stepJob(second, stale);
    assert.deepEqual(same.value, { recovering: 'afterStart' });
    assert.deepEqual(intents, []);
  });

  it('the owner’s terminal status while recovering is accepted', () => {
    const [recovering] = stepJob(startedJob(), disconnected(5_000));
    const [done, intents] = stepJob(recovering, status('failed', 7_000, OWNER, 'exit code 1'));
    assert.equal(done.value, 'failed');
    assert.equal(done.context.outcome, 'exit code 1');
    assert.deepEqual(intents, [intent.disarm('recovery')]);
  });

  it('heartbeats while recovering change nothing (the agent must reclaim first)', () => {
    const [recovering] = stepJob(startedJob(), disconnected(5_000));
    const [same, intents] = stepJob(recovering, heartbeat(6_000));
    assert.deepEqual(same.value, { recovering: 'afterStart' });
    assert.deepEqual(intents, []);
  });
});

describe('job machine: scaler agent loss', () => {
  it('before start (dispatched) → requeued → queued, attempt kept, slot released, queue re-armed', () => {
    const [queued, intents] = stepJob(dispatchedJob('scaler'), disconnected(3_000));
    assert.equal(queued.value, 'queued');
    assert.equal(queued.context.attempt, 1);
    assert.equal(queued.context.outcome, 'scaler agent lost before start');
    assert.deepEqual(intents, [intent.disarm('ack'), intent.releaseSlot(), intent.arm('queue', 3_000 + HOUR), intent.placement(1)]);
  });

  it('after ack but before start → requeued', () => {
    const [queued, intents] = stepJob(acceptedJob('scaler'), disconnected(3_000));
    assert.equal(queued.value, 'queued');
    assert.deepEqual(intents, [intent.disarm('lease'), intent.releaseSlot(), intent.arm('queue', 3_000 + HOUR), intent.placement(1)]);
  });

  it('after start → failed "scaler agent lost mid-execution", never requeued', () => {
    const [failed, intents] = stepJob(startedJob('scaler'), disconnected(9_000));
    assert.equal(failed.value, 'failed');
    assert.equal(failed.context.outcome, 'scaler agent lost mid-execution');
    assert.deepEqual(intents, [intent.disarm('lease'), intent.releaseSlot()]);
  });
});

describe('job machine: job timeout backstop', () => {
  const timeouts = { ...DEFAULT_JOB_TIMEOUTS, jobTimeoutMs: 15 * 60_000 };

  it('is armed on running.started at timeout + gracePeriod (30 s) + 60 s', () => {
    const [started, intents] = stepJob(acceptedJob('static', jobInput({ timeouts })), status('running', T.running));
    assert.deepEqual(intents, [intent.arm('lease', T.running + 120_000), intent.arm('jobTimeout', T.running + 15 * 60_000 + 30_000 + 60_000)]);
    assert.deepEqual(started.value, { assigned: { running: 'started' } });
  });

  it('is not armed without a job timeout', () => {
    assert.equal(startedJob().context.deadlines.jobTimeout, undefined);
  });

  it('fires → forced cancel and failed "job_timeout"', () => {
    const started = startedJob('static', jobInput({ timeouts }));
    const [failed, intents] = stepJob(started, expiry(started, 'jobTimeout'));
    assert.equal(failed.value, 'failed');
    assert.equal(failed.context.outcome, 'job_timeout');
    assert.deepEqual(intents, [
      intent.disarm('lease'),
      intent.releaseSlot(),
      intent.cancel(true, 'job_timeout'),
      intent.disarm('jobTimeout'),
    ]);
  });

  it('survives a recovery: after reclaim the same backstop deadline still ends the job', () => {
    const started = startedJob('static', jobInput({ timeouts }));
    const armed = started.context.deadlines.jobTimeout;
    const [recovering] = stepJob(started, disconnected(5_000));
    const [running] = stepJob(recovering, reclaim(6_000));
    assert.deepEqual(running.context.deadlines.jobTimeout, armed);
    const [failed] = stepJob(running, expiry(running, 'jobTimeout'));
    assert.equal(failed.value, 'failed');
  });
});
