import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { transition } from 'xstate';
import { jobMachine } from '../../../machines/job.machine.ts';
import type { JobSnapshot } from '../../../machines/job.machine.ts';
import { ackVerdict } from '../../../machines/job.withdrawal.ts';
import type { AckHolderAnswer } from '../../../machines/job.withdrawal.ts';
import { DEFAULT_JOB_TIMEOUTS } from '../../../machines/types.ts';
import {
  LEASE,
  OWNER,
  RunHarness,
  ack,
  ackHolder,
  cancel,
  cancelReported,
  dispatchedJob,
  expiry,
  intent,
  jobPlan,
  reclaim,
  stateName,
  stepJob,
  stepsJob,
  types,
} from '../../support/machines.ts';

const { leaseTtlMs: TTL, leaseRenewMs: RENEW } = LEASE;
/** The ack deadline of `dispatchedJob()`: granted at 2 s, 10 s to ack. */
const DUE = 12_000;
const peer = (leaseUntil: number) => ({ kind: 'session' as const, coordinatorId: 'coord-b', leaseUntil });
const answer = (at: number, holder: AckHolderAnswer['holder']): AckHolderAnswer => ({ holder, ...LEASE, at });

/** The ack deadline of `dispatchedJob()` fires on time; the job asks where its agent is. */
function overdue(): JobSnapshot {
  const dispatched = dispatchedJob();
  const [asking, intents] = stepJob(dispatched, expiry(dispatched, 'ack'));
  assert.deepEqual(intents, [intent.askAckHolder()]);
  return asking;
}

describe('the verdict on an overdue ack (machines/job.withdrawal.ts)', () => {
  it('the agent’s socket here: the attempt is withdrawn at once', () => {
    assert.deepEqual(ackVerdict('unheld', answer(DUE, { kind: 'here' }), DUE), { kind: 'deliver' });
  });

  it('B7: no socket of the agent on any coordinator → the job hears its agent disconnected, never the expiry that would requeue it while the agent may run it', () => {
    assert.deepEqual(ackVerdict('unheld', answer(DUE, { kind: 'none' }), DUE), { kind: 'lost', cause: 'agent' });
    assert.deepEqual(ackVerdict('held', answer(DUE, { kind: 'none' }), DUE), { kind: 'lost', cause: 'coordinator' }, 'its sessions cleared with a peer seen frozen');
  });

  it('B7: a peer killed just before the deadline looks renewing, but never renews again → the job waits, then hears its agent went with the coordinator; never requeued', () => {
    const renewedJustBefore = DUE - 100 + TTL;
    assert.deepEqual(ackVerdict('unheld', answer(DUE, peer(renewedJustBefore)), DUE), { kind: 'wait', phase: 'unheld', ms: RENEW });
    assert.deepEqual(ackVerdict('unheld', answer(DUE + RENEW, peer(renewedJustBefore)), DUE), { kind: 'wait', phase: 'unheld', ms: RENEW }, 'renewed before the deadline only');
    assert.deepEqual(ackVerdict('unheld', answer(DUE + 5_000, peer(renewedJustBefore)), DUE), { kind: 'wait', phase: 'held', ms: RENEW }, 'no longer renewing: held');
    assert.deepEqual(ackVerdict('held', answer(renewedJustBefore, peer(renewedJustBefore)), DUE), { kind: 'lost', cause: 'coordinator' });
  });

  it('a frozen peer that renews again gets two renew intervals to pass on what it received, then the expiry is delivered', () => {
    assert.deepEqual(ackVerdict('unheld', answer(DUE, peer(DUE + 3_000)), DUE), { kind: 'wait', phase: 'held', ms: RENEW }, 'its lease runs, but it has not renewed for a while');
    const back = peer(DUE + 3_000 + TTL);
    assert.deepEqual(ackVerdict('held', answer(DUE + 3_000, back), DUE), { kind: 'wait', phase: 'settling', ms: 2 * RENEW });
    assert.deepEqual(ackVerdict('settling', answer(DUE + 7_000, peer(DUE + 7_000 + TTL)), DUE), { kind: 'deliver' });
  });

  it('a peer renewing since the deadline is alive with the agent’s socket: delivered; one that neither renews nor lapses is not waited for past three lease lifetimes', () => {
    assert.deepEqual(ackVerdict('unheld', answer(DUE + 1, peer(DUE + 1 + TTL)), DUE), { kind: 'deliver' });
    assert.deepEqual(ackVerdict('held', answer(DUE + 3 * TTL + 1, peer(DUE + 3 * TTL + 1_000)), DUE), { kind: 'deliver' });
  });

  it('a question that fails: delivered before any hold, asked again once held (delivering then could run the job twice)', () => {
    assert.deepEqual(ackVerdict('unheld', answer(DUE, { kind: 'unknown' }), DUE), { kind: 'deliver' });
    assert.deepEqual(ackVerdict('held', answer(DUE, { kind: 'unknown' }), DUE), { kind: 'wait', phase: 'held', ms: RENEW });
  });
});

describe('job chart: an overdue ack is held in states with durable deadlines (simulated clock)', () => {
  it('a frozen peer: held, asked again at each recheck deadline; the agent’s ack through the peer still starts the job', () => {
    const [held, intents] = stepJob(overdue(), ackHolder(DUE, peer(DUE + 3_000)));
    assert.equal(stateName(held.value), 'assigned.dispatched.ackOverdue.held.waiting');
    assert.deepEqual(intents, [{ type: 'armDeadline', params: { id: 'build#recheck', kind: 'recheck', at: DUE + RENEW, jobKey: 'build' } }]);
    const [asking, asked] = stepJob(held, expiry(held, 'recheck'));
    assert.equal(stateName(asking.value), 'assigned.dispatched.ackOverdue.held.asking');
    assert.deepEqual(asked, [intent.askAckHolder()]);
    const [running, started] = stepJob(asking, ack(DUE + RENEW + 10));
    assert.equal(stateName(running.value), 'assigned.running.accepted');
    assert.ok(types(started).includes('disarmDeadline'));
    assert.equal(running.context.deadlines.recheck, undefined, 'the recheck deadline went with the hold');
  });

  it('the peer’s lease ran out: the job hears its agent went with that coordinator and waits for the reclaim', () => {
    const [recovering] = stepJob(overdue(), ackHolder(DUE, peer(DUE - 1)));
    assert.equal(stateName(recovering.value), 'recovering.beforeStart');
    assert.equal(recovering.context.assignment?.recovery, 'coordinator_restart');
    assert.ok(recovering.context.deadlines.recovery, 'the recovery window runs');
    const [accepted] = stepJob(recovering, reclaim(DUE + 500));
    assert.equal(stateName(accepted.value), 'assigned.running.accepted');
  });

  it('no session anywhere: a static agent gets its recovery window; a scaler agent’s attempt is tried again', () => {
    const [recovering] = stepJob(overdue(), ackHolder(DUE, { kind: 'none' }));
    assert.equal(stateName(recovering.value), 'recovering.beforeStart');
    assert.equal(recovering.context.assignment?.recovery, 'disconnect');
    const scaler = dispatchedJob('scaler');
    const [requeued] = stepsJob(scaler, [expiry(scaler, 'ack'), ackHolder(DUE, { kind: 'none' })]);
    assert.equal(requeued.value, 'queued');
    assert.equal(requeued.context.outcome, 'scaler agent lost before start');
  });
});

describe('job chart: a withdrawn attempt fences its job until the cancel has gone out (B7)', () => {
  const withdrawing = () => stepJob(overdue(), ackHolder(DUE))[0];

  it('a cancel left with a peer: waits with the reason, asks at each poll, and is queued again once the peer passed it on', () => {
    const [fenced, intents] = stepJob(withdrawing(), cancelReported(DUE + 5, { kind: 'peer', coordinatorId: 'coord-b', commandId: 41 }));
    assert.equal(stateName(fenced.value), 'withdrawing.fenced.waiting');
    assert.equal(fenced.context.waiting?.message, 'waiting for coordinator coord-b to pass on the cancel of the previous attempt to agent agent-1');
    assert.deepEqual(fenced.context.deadlines.fence, { id: 'build#fence', at: DUE + DEFAULT_JOB_TIMEOUTS.recoveryMs }, 'held at most the recovery window from the withdrawal');
    assert.deepEqual(intents.at(-1), { type: 'armDeadline', params: { id: 'build#recheck', kind: 'recheck', at: DUE + 5 + RENEW, jobKey: 'build' } });
    const [asking, asked] = stepJob(fenced, expiry(fenced, 'recheck'));
    assert.deepEqual(asked, [{ type: 'checkCancelFence', params: { jobKey: 'build', agentId: OWNER.agentId, commandId: 41 } }]);
    const [still] = stepJob(asking, { type: 'fence.checked', lifted: false, at: DUE + RENEW + 10 });
    assert.equal(stateName(still.value), 'withdrawing.fenced.waiting');
    const [queued, requeued] = stepsJob(still, [expiry(still, 'recheck'), { type: 'fence.checked', lifted: true, at: DUE + 2 * RENEW + 20 }]);
    assert.equal(queued.value, 'queued');
    assert.equal(queued.context.withdrawal, null);
    assert.ok(types(requeued).includes('requestPlacement'));
  });

  it('a cancel that found no socket of its agent anywhere holds the job until the agent is back, or until its recovery window has passed', () => {
    const [fenced] = stepJob(withdrawing(), cancelReported(DUE + 5, { kind: 'unreachable' }));
    assert.match(fenced.context.waiting?.message ?? '', /^waiting for agent agent-1, which lost its socket before the previous attempt's cancel reached it, to reconnect/);
    const [asking, asked] = stepJob(fenced, expiry(fenced, 'recheck'));
    assert.deepEqual(asked, [{ type: 'checkCancelFence', params: { jobKey: 'build', agentId: OWNER.agentId, commandId: null } }]);
    assert.equal(stateName(asking.value), 'withdrawing.fenced.asking');
    const [queued] = stepJob(asking, expiry(asking, 'fence'));
    assert.equal(queued.value, 'queued', 'the hold ends at its limit whatever the answers');
  });

  it('no report ever comes (the database never answered): the fence deadline ends the hold at the recovery window', () => {
    const job = withdrawing();
    assert.deepEqual(job.context.deadlines.fence, { id: 'build#fence', at: DUE + DEFAULT_JOB_TIMEOUTS.recoveryMs });
    const [queued] = stepJob(job, expiry(job, 'fence'));
    assert.equal(queued.value, 'queued');
  });

  it('a report for another attempt changes nothing; a cancel of the run ends the fenced job cancelled', () => {
    const job = withdrawing();
    const [same] = stepJob(job, cancelReported(DUE + 5, { kind: 'sent' }, { agentId: 'agent-1', dispatchId: 'dispatch-0' }));
    assert.equal(same, job, 'the very same snapshot');
    const [cancelled] = stepJob(job, cancel(DUE + 6, true));
    assert.equal(cancelled.value, 'cancelled');
  });

  it('a fence survives a restore in another process: its state, reason and deadlines come back, and the next answer lifts it', () => {
    const h = RunHarness.start([jobPlan('build')]);
    const owner = h.dispatch('build', 2_000);
    h.expire('build', 'ack');
    h.send({ ...ackHolder(DUE), jobKey: 'build' });
    h.send({ ...cancelReported(DUE + 5, { kind: 'peer', coordinatorId: 'coord-b', commandId: 41 }, owner), jobKey: 'build' });
    const restored = h.restore();
    assert.equal(restored.jobState('build'), 'withdrawing.fenced.waiting');
    assert.deepEqual(Object.keys(restored.child('build').context.deadlines).sort(), ['fence', 'recheck']);
    restored.expire('build', 'recheck');
    restored.send({ type: 'fence.checked', lifted: true, at: DUE + RENEW + 10, jobKey: 'build' });
    assert.equal(restored.jobState('build'), 'queued');
  });

  it('a snapshot stored by the chart before these states (dispatched was a leaf) restores waiting for the ack', () => {
    const stored = JSON.parse(JSON.stringify(dispatchedJob())) as { value: unknown };
    stored.value = { assigned: 'dispatched' };
    const resolved = jobMachine.resolveState({ value: stored.value as never, context: dispatchedJob().context });
    assert.equal(stateName(resolved.value), 'assigned.dispatched.awaitingAck');
    const [asking] = transition(jobMachine, resolved, expiry(resolved, 'ack'));
    assert.equal(stateName(asking.value), 'assigned.dispatched.ackOverdue.unheld.asking');
  });
});
