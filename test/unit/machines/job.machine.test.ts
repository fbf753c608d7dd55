import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { InitFailure, JobTimeouts, WaitingReason } from '../../../machines/types.ts';
import { DEFAULT_JOB_TIMEOUTS } from '../../../machines/types.ts';
import {
  OWNER,
  T,
  ack,
  ackHolder,
  cancelReported,
  acceptedJob,
  dispatchedJob,
  expiry,
  granted,
  heartbeat,
  intent,
  jobInput,
  queuedJob,
  reject,
  startJob,
  startedJob,
  status,
  stepJob,
  stepStatus,
  stepsJob,
} from '../../support/machines.ts';

const HOUR = 60 * 60_000;
const CONCURRENCY = { key: 'acme/app::deploy', policy: { cancelInProgress: false, max: 1 } };
const NEEDS: WaitingReason = { kind: 'needs', message: 'waiting for upstream jobs: lint' };

describe('job machine: admission', () => {
  it('created → queued: arms the queue deadline and asks for placement', () => {
    const [snapshot, intents] = startJob();
    assert.equal(snapshot.value, 'queued');
    assert.deepEqual(intents, [intent.arm('queue', T.created + HOUR), intent.placement(0)]);
    assert.equal(snapshot.context.waiting, null);
  });

  it('created → waiting.gated with the gate as its readable reason, and nothing recorded', () => {
    const [snapshot, intents] = startJob(jobInput({ gate: NEEDS }));
    assert.deepEqual(snapshot.value, { waiting: 'gated' });
    assert.deepEqual(snapshot.context.waiting, NEEDS);
    assert.deepEqual(intents, []);
  });

  it('created → failed when the job carries an init failure; no placement is requested', () => {
    const failure: InitFailure = { scope: 'job', category: 'dynamic_eval', message: 'matrix source failed', jobName: 'build' };
    const [snapshot, intents] = startJob(jobInput({ initFailure: failure }));
    assert.equal(snapshot.value, 'failed');
    assert.equal(snapshot.status, 'done');
    assert.deepEqual(snapshot.context.initFailure, failure);
    assert.equal(snapshot.context.outcome, 'matrix source failed');
    assert.deepEqual(intents, []);
  });

  it('job.gate updates the reason; job.release admits the job at the release time', () => {
    const [gated] = startJob(jobInput({ gate: NEEDS }));
    const wave: WaitingReason = { kind: 'wave', message: 'waiting for a free place' };
    const [regated, none] = stepJob(gated, { type: 'job.gate', reason: wave, at: 3_000 });
    assert.deepEqual(regated.value, { waiting: 'gated' });
    assert.deepEqual(regated.context.waiting, wave);
    assert.deepEqual(none, []);
    const [released, intents] = stepJob(regated, { type: 'job.release', at: 5_000 });
    assert.equal(released.value, 'queued');
    assert.equal(released.context.waiting, null);
    assert.deepEqual(intents, [intent.arm('queue', 5_000 + HOUR), intent.placement(0)]);
  });

  it('a job in a concurrency group requests it, names its position while queued, and is queued when granted', () => {
    const [waiting, requested] = startJob(jobInput({ concurrency: CONCURRENCY }));
    assert.deepEqual(waiting.value, { waiting: 'concurrency' });
    assert.deepEqual(requested, [{ type: 'requestConcurrency', params: { jobKey: 'build', ...CONCURRENCY } }]);
    const [inLine, none] = stepJob(waiting, { type: 'concurrency.queued', position: 3, at: 2_000 });
    assert.deepEqual(inLine.context.waiting, {
      kind: 'concurrency',
      message: 'waiting for concurrency group acme/app::deploy (position 3)',
    });
    assert.deepEqual(none, []);
    const [queued, intents] = stepJob(inLine, { type: 'concurrency.granted', at: 4_000 });
    assert.equal(queued.value, 'queued');
    assert.equal(queued.context.holdsConcurrency, true);
    assert.equal(queued.context.waiting, null);
    assert.deepEqual(intents, [intent.arm('queue', 4_000 + HOUR), intent.placement(0)]);
  });

  it('a concurrency grant with queueMs 0 arms no queue deadline (0 means never)', () => {
    const timeouts: JobTimeouts = { ...DEFAULT_JOB_TIMEOUTS, queueMs: 0 };
    const [waiting] = startJob(jobInput({ concurrency: CONCURRENCY, timeouts }));
    const [queued, intents] = stepJob(waiting, { type: 'concurrency.granted', at: 4_000 });
    assert.equal(queued.value, 'queued');
    assert.deepEqual(intents, [intent.placement(0)]);
    assert.deepEqual(queued.context.deadlines, {});
  });

  it('a holder releases its concurrency group when it ends', () => {
    const [waiting] = startJob(jobInput({ concurrency: CONCURRENCY }));
    const [queued] = stepJob(waiting, { type: 'concurrency.granted', at: 4_000 });
    const [ended, intents] = stepsJob(queued, [granted(5_000), status('success', 6_000)]);
    assert.equal(ended.value, 'success');
    assert.deepEqual(intents.at(-1), { type: 'releaseConcurrency', params: { jobKey: 'build', key: CONCURRENCY.key } });
  });
});

describe('job machine: placement and dispatch', () => {
  it('placement.granted → dispatched: attempt 1, queue disarmed, ack armed at +10 s, job.dispatch sent', () => {
    const [snapshot, intents] = stepJob(queuedJob(), granted(T.granted));
    assert.deepEqual(snapshot.value, { assigned: { dispatched: 'awaitingAck' } });
    assert.equal(snapshot.context.attempt, 1);
    assert.deepEqual(snapshot.context.assignment, { ...OWNER, agentKind: 'static' });
    assert.deepEqual(intents, [intent.disarm('queue'), intent.arm('ack', T.granted + 10_000), intent.dispatch(1)]);
  });

  it('placement.none → waiting.agent with the readable reason; the queue deadline keeps running', () => {
    const reason: WaitingReason = { kind: 'no_matching_agent', message: 'no agent has the labels linux, gpu' };
    const [waiting, intents] = stepJob(queuedJob(), { type: 'placement.none', reason, at: 2_000 });
    assert.deepEqual(waiting.value, { waiting: 'agent' });
    assert.deepEqual(waiting.context.waiting, reason);
    assert.deepEqual(intents, []);
    assert.equal(waiting.context.deadlines.queue?.at, T.created + HOUR);
    const capacity: WaitingReason = { kind: 'capacity', message: 'every matching agent is busy' };
    const [still] = stepJob(waiting, { type: 'placement.none', reason: capacity, at: 3_000 });
    assert.deepEqual(still.context.waiting, capacity);
    const [dispatched, placed] = stepJob(still, granted(4_000));
    assert.deepEqual(dispatched.value, { assigned: { dispatched: 'awaitingAck' } });
    assert.equal(dispatched.context.waiting, null);
    assert.deepEqual(placed, [intent.disarm('queue'), intent.arm('ack', 14_000), intent.dispatch(1)]);
  });

  it('placement.refused → failed with init failure no_agent "queue full"', () => {
    const [snapshot, intents] = stepJob(queuedJob(), { type: 'placement.refused', message: 'queue depth 1000 reached', at: 2_000 });
    assert.equal(snapshot.value, 'failed');
    assert.deepEqual(snapshot.context.initFailure, { scope: 'job', category: 'no_agent', message: 'queue full', jobName: 'build' });
    assert.deepEqual(intents, [intent.disarm('queue')]);
  });

  it('ack → running.accepted: ack disarmed, lease armed from the ack time', () => {
    const [snapshot, intents] = stepJob(dispatchedJob(), ack(T.ack));
    assert.deepEqual(snapshot.value, { assigned: { running: 'accepted' } });
    assert.deepEqual(intents, [intent.disarm('ack'), intent.arm('lease', T.ack + 120_000)]);
  });

  it('job.status running straight from dispatched → running.started', () => {
    const [snapshot, intents] = stepJob(dispatchedJob(), status('running', T.running));
    assert.deepEqual(snapshot.value, { assigned: { running: 'started' } });
    assert.deepEqual(intents, [intent.disarm('ack'), intent.arm('lease', T.running + 120_000)]);
  });

  it('an ack that arrives after job.status running is a no-op', () => {
    const [started] = stepJob(dispatchedJob(), status('running', T.running));
    const [after, intents] = stepJob(started, ack(T.running + 5));
    assert.deepEqual(after.value, { assigned: { running: 'started' } });
    assert.deepEqual(after.context, started.context);
    assert.deepEqual(intents, []);
  });

  it('ack then running: accepted → started, and the running status renews the lease', () => {
    const [started, intents] = stepJob(acceptedJob(), status('running', 30_000));
    assert.deepEqual(started.value, { assigned: { running: 'started' } });
    assert.deepEqual(intents, [intent.arm('lease', 30_000 + 120_000)]);
  });
});

describe('job machine: lease', () => {
  for (const [name, renew] of [
    ['heartbeat', heartbeat],
    ['step.status', stepStatus],
    ['job.status running', (at: number) => status('running', at)],
  ] as const) {
    it(`${name} renews the lease; the firing of the old lease is ignored, the new one times the job out`, () => {
      const started = startedJob();
      const oldFiring = expiry(started, 'lease');
      const [renewed, intents] = stepJob(started, renew(60_000));
      assert.deepEqual(intents, [intent.arm('lease', 60_000 + 120_000)]);
      const [ignored, none] = stepJob(renewed, oldFiring);
      assert.deepEqual(ignored.value, { assigned: { running: 'started' } });
      assert.deepEqual(none, []);
      const [stale] = stepJob(ignored, expiry(ignored, 'lease'));
      assert.equal(stale.value, 'timed_out_stale');
    });
  }

  it('lease expiry → timed_out_stale with a forced cancel "stale"', () => {
    const started = startedJob();
    const [stale, intents] = stepJob(started, expiry(started, 'lease'));
    assert.equal(stale.value, 'timed_out_stale');
    assert.equal(stale.context.outcome, 'no heartbeat within the job lease');
    assert.deepEqual(intents, [intent.disarm('lease'), intent.releaseSlot(), intent.cancel(true, 'stale')]);
  });
});

describe('job machine: requeue and attempts', () => {
  it('reject → requeued → queued: slot released, queue deadline re-armed, next placement is attempt 2', () => {
    const [queued, intents] = stepJob(dispatchedJob(), reject(3_000));
    assert.equal(queued.value, 'queued');
    assert.equal(queued.context.attempt, 1);
    assert.equal(queued.context.assignment, null);
    assert.equal(queued.context.outcome, 'rejected by agent');
    assert.deepEqual(intents, [intent.disarm('ack'), intent.releaseSlot(), intent.arm('queue', 3_000 + HOUR), intent.placement(1)]);
    const second = { agentId: 'agent-2', dispatchId: 'dispatch-2' };
    const [again, placed] = stepJob(queued, granted(4_000, second));
    assert.equal(again.context.attempt, 2);
    assert.deepEqual(placed.at(-1), intent.dispatch(2, second));
  });

  it('the ack firing of an earlier attempt is ignored by the next attempt', () => {
    const first = dispatchedJob();
    const firstAckFiring = expiry(first, 'ack');
    const second = { agentId: 'agent-2', dispatchId: 'dispatch-2' };
    const [redispatched] = stepsJob(first, [reject(3_000), granted(4_000, second)]);
    const [same, intents] = stepJob(redispatched, firstAckFiring);
    assert.deepEqual(same.value, { assigned: { dispatched: 'awaitingAck' } });
    assert.deepEqual(same.context.assignment, { ...second, agentKind: 'static' });
    assert.deepEqual(intents, []);
  });

  it('ack timeout → the job asks where its agent is; here: forced cancel "dispatch ack timeout" (reported), close 4031, then the slot is freed; requeue once the cancel went out', () => {
    const dispatched = dispatchedJob();
    const fired = expiry(dispatched, 'ack');
    const [asking, asked] = stepJob(dispatched, fired);
    assert.deepEqual(asking.value, { assigned: { dispatched: { ackOverdue: { unheld: 'asking' } } } });
    assert.deepEqual(asked, [intent.askAckHolder()]);
    const [withdrawing, intents] = stepJob(asking, ackHolder(fired.at));
    assert.deepEqual(withdrawing.value, { withdrawing: 'cancelling' });
    assert.equal(withdrawing.context.outcome, 'dispatch ack timeout');
    assert.equal(withdrawing.context.assignment, null, 'the attempt is withdrawn: a reclaim of it is refused');
    // Found by the chaos suite: freed before the close, the slot was granted to another job on the
    // socket being closed, and that job waited out the recovery window for an agent that never had it.
    assert.deepEqual(intents, [
      intent.disarm('ack'),
      { type: 'armDeadline', params: { id: 'build#fence', kind: 'fence', at: fired.at + DEFAULT_JOB_TIMEOUTS.recoveryMs, jobKey: 'build' } },
      intent.cancel(true, 'dispatch ack timeout', OWNER, 'build', true),
      { type: 'closeAgentConnection', params: { agentId: OWNER.agentId, code: 4031, reason: 'dispatch ack timeout' } },
      intent.releaseSlot(),
    ]);
    const [queued, requeued] = stepJob(withdrawing, cancelReported(fired.at + 5));
    assert.equal(queued.value, 'queued');
    assert.deepEqual(requeued, [intent.disarm('fence'), intent.arm('queue', fired.at + 5 + HOUR), intent.placement(1)]);
  });

  it('the fifth attempt that fails → failed "re-dispatch attempts exhausted after 5 attempts"', () => {
    let snapshot = queuedJob();
    for (let attempt = 1; attempt <= 5; attempt++) {
      const owner = { agentId: 'agent-1', dispatchId: `dispatch-${attempt}` };
      [snapshot] = stepsJob(snapshot, [granted(attempt * 1_000, owner), reject(attempt * 1_000 + 10, owner)]);
      assert.equal(snapshot.context.attempt, attempt);
      assert.equal(snapshot.value, attempt < 5 ? 'queued' : 'failed');
    }
    assert.equal(snapshot.context.outcome, 're-dispatch attempts exhausted after 5 attempts');
    assert.equal(snapshot.status, 'done');
  });
});

describe('job machine: queue expiry', () => {
  it('never dispatched → failed with init failure no_agent naming the last reason', () => {
    const reason: WaitingReason = { kind: 'no_matching_agent', message: 'no agent has the labels gpu' };
    const [waiting] = stepJob(queuedJob(), { type: 'placement.none', reason, at: 2_000 });
    const [failed, intents] = stepJob(waiting, expiry(waiting, 'queue'));
    assert.equal(failed.value, 'failed');
    const message = 'no agent became available within the queue timeout (no agent has the labels gpu)';
    assert.deepEqual(failed.context.initFailure, { scope: 'job', category: 'no_agent', message, jobName: 'build' });
    assert.deepEqual(intents, [intent.disarm('queue')]);
  });

  it('dispatched before (then requeued) → timed_out_stale', () => {
    const [queued] = stepJob(dispatchedJob(), reject(3_000));
    const [stale] = stepJob(queued, expiry(queued, 'queue'));
    assert.equal(stale.value, 'timed_out_stale');
    assert.equal(stale.context.initFailure, null);
    assert.match(stale.context.outcome ?? '', /^queue timeout passed/);
  });

  it('after scaler spawn failures → timed_out_stale naming the last provisioning error', () => {
    const reason: WaitingReason = { kind: 'scaler_spawning', message: 'spawning on k8s' };
    const [waiting] = stepJob(queuedJob(), { type: 'placement.none', reason, at: 2_000 });
    const [failedSpawn, none] = stepJob(waiting, { type: 'provision.failed', message: 'image pull failed', at: 3_000 });
    assert.deepEqual(failedSpawn.value, { waiting: 'agent' });
    assert.deepEqual(failedSpawn.context.waiting, { kind: 'scaler_failed', message: 'image pull failed' });
    assert.equal(failedSpawn.context.attempt, 1);
    assert.deepEqual(none, []);
    const [stale] = stepJob(failedSpawn, expiry(failedSpawn, 'queue'));
    assert.equal(stale.value, 'timed_out_stale');
    assert.equal(stale.context.outcome, 'queue timeout passed; last reason: image pull failed');
  });

  it('a queue firing that does not match the armed deadline is ignored', () => {
    const queued = queuedJob();
    const wrong = { ...expiry(queued, 'queue'), dueAt: 5 };
    const [same, intents] = stepJob(queued, wrong);
    assert.equal(same.value, 'queued');
    assert.deepEqual(intents, []);
  });
});

describe('job machine: messages from a non-owner change nothing', () => {
  const stranger = { agentId: 'agent-9', dispatchId: OWNER.dispatchId };
  const olderDispatch = { agentId: OWNER.agentId, dispatchId: 'dispatch-0' };
  for (const [who, owner] of [
    ['another agent', stranger],
    ['an older dispatch', olderDispatch],
  ] as const) {
    it(`${who}: ack, reject, status and reclaim in dispatched; heartbeat and status in running`, () => {
      const dispatched = dispatchedJob();
      for (const event of [ack(3_000, owner), reject(3_000, owner), status('running', 3_000, owner), status('success', 3_000, owner)]) {
        const [same, intents] = stepJob(dispatched, event);
        assert.deepEqual(same.value, { assigned: { dispatched: 'awaitingAck' } }, event.type);
        assert.deepEqual(intents, [], event.type);
      }
      const started = startedJob();
      for (const event of [heartbeat(9_000, owner), stepStatus(9_000, owner), status('failed', 9_000, owner)]) {
        const [same, intents] = stepJob(started, event);
        assert.deepEqual(same.value, { assigned: { running: 'started' } }, event.type);
        assert.deepEqual(same.context, started.context, event.type);
        assert.deepEqual(intents, [], event.type);
      }
    });
  }

  it('the disconnect of another agent', () => {
    const [same, intents] = stepJob(startedJob(), { type: 'agent.disconnected', agentId: 'agent-9', at: 9_000 });
    assert.deepEqual(same.value, { assigned: { running: 'started' } });
    assert.deepEqual(intents, []);
  });
});
