import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { JobSnapshot } from '../../../machines/job.machine.ts';
import type { JobEvent } from '../../../machines/job.events.ts';
import {
  OWNER,
  T,
  ack,
  acceptedJob,
  cancel,
  disconnected,
  dispatchedJob,
  expiry,
  granted,
  heartbeat,
  intent,
  jobInput,
  queuedJob,
  reclaim,
  reject,
  startJob,
  startedJob,
  status,
  stepJob,
  stepStatus,
} from '../../support/machines.ts';

const GATE = { kind: 'needs' as const, message: 'waiting for upstream jobs: lint' };
const CONCURRENCY = { key: 'acme/app::deploy', policy: { cancelInProgress: false, max: 1 } };

function cancellingJob(): JobSnapshot {
  return stepJob(startedJob(), cancel(10_000, false))[0];
}

describe('job machine: cancel (orchestration.md §11)', () => {
  for (const force of [false, true]) {
    const mode = force ? 'force' : 'graceful';

    it(`${mode}: waiting.gated → cancelled at once, no message`, () => {
      const [gated] = startJob(jobInput({ gate: GATE }));
      const [cancelled, intents] = stepJob(gated, cancel(5_000, force));
      assert.equal(cancelled.value, 'cancelled');
      assert.equal(cancelled.context.outcome, 'cancelled by user');
      assert.deepEqual(intents, []);
    });

    it(`${mode}: waiting.agent and queued → cancelled, only the queue deadline disarmed`, () => {
      const reason = { kind: 'capacity' as const, message: 'every matching agent is busy' };
      const [waiting] = stepJob(queuedJob(), { type: 'placement.none', reason, at: 2_000 });
      for (const snapshot of [queuedJob(), waiting]) {
        const [cancelled, intents] = stepJob(snapshot, cancel(5_000, force));
        assert.equal(cancelled.value, 'cancelled');
        assert.deepEqual(intents, [intent.disarm('queue')]);
      }
    });

    it(`${mode}: waiting.concurrency → cancelled and leaves the group's queue`, () => {
      const [waiting] = startJob(jobInput({ concurrency: CONCURRENCY }));
      const [cancelled, intents] = stepJob(waiting, cancel(5_000, force));
      assert.equal(cancelled.value, 'cancelled');
      assert.deepEqual(intents, [{ type: 'releaseConcurrency', params: { jobKey: 'build', key: CONCURRENCY.key } }]);
    });

    it(`${mode}: dispatched → forced job.cancel, cancelled, slot freed`, () => {
      const [cancelled, intents] = stepJob(dispatchedJob(), cancel(5_000, force));
      assert.equal(cancelled.value, 'cancelled');
      assert.deepEqual(intents, [intent.disarm('ack'), intent.releaseSlot(), intent.cancel(true, 'cancelled')]);
    });

    it(`${mode}: recovering → cancelled without a message to the lost agent`, () => {
      const [recovering] = stepJob(startedJob(), disconnected(5_000));
      const [cancelled, intents] = stepJob(recovering, cancel(6_000, force));
      assert.equal(cancelled.value, 'cancelled');
      assert.deepEqual(intents, [intent.disarm('recovery')]);
    });
  }

  it('graceful: running → job.cancel (force false) and cancelling with the cancel deadline', () => {
    for (const running of [acceptedJob(), startedJob()]) {
      const [cancelling, intents] = stepJob(running, cancel(10_000, false));
      assert.deepEqual(cancelling.value, { assigned: 'cancelling' });
      assert.deepEqual(intents, [
        intent.disarm('lease'),
        intent.cancel(false, 'cancelled by user'),
        intent.arm('cancel', 10_000 + 60_000),
      ]);
    }
  });

  it('force: running → forced job.cancel and cancelled at once', () => {
    const [cancelled, intents] = stepJob(startedJob(), cancel(10_000, true));
    assert.equal(cancelled.value, 'cancelled');
    assert.deepEqual(intents, [intent.disarm('lease'), intent.releaseSlot(), intent.cancel(true, 'cancelled')]);
  });

  it('cancelling + graceful cancel: no change', () => {
    const cancelling = cancellingJob();
    const [same, intents] = stepJob(cancelling, cancel(11_000, false));
    assert.deepEqual(same.value, { assigned: 'cancelling' });
    assert.deepEqual(intents, []);
  });

  it('cancelling + force: escalates to a forced job.cancel → cancelled', () => {
    const [cancelled, intents] = stepJob(cancellingJob(), cancel(11_000, true));
    assert.equal(cancelled.value, 'cancelled');
    assert.deepEqual(intents, [intent.disarm('cancel'), intent.releaseSlot(), intent.cancel(true, 'cancelled')]);
  });

  it('cancel deadline expiry → forced job.cancel → cancelled', () => {
    const cancelling = cancellingJob();
    const [cancelled, intents] = stepJob(cancelling, expiry(cancelling, 'cancel'));
    assert.equal(cancelled.value, 'cancelled');
    assert.deepEqual(intents, [intent.disarm('cancel'), intent.releaseSlot(), intent.cancel(true, 'cancel grace period expired')]);
  });

  it('cancelling: the agent’s cancelled or failed status ends the job as reported', () => {
    for (const state of ['cancelled', 'failed'] as const) {
      const [ended, intents] = stepJob(cancellingJob(), status(state, 12_000));
      assert.equal(ended.value, state);
      assert.deepEqual(intents, [intent.disarm('cancel'), intent.releaseSlot()]);
    }
  });

  it('cancelling: the agent reporting cancelling from running enters cancelling with the deadline', () => {
    const [cancelling, intents] = stepJob(startedJob(), status('cancelling', 12_000));
    assert.deepEqual(cancelling.value, { assigned: 'cancelling' });
    assert.deepEqual(intents, [intent.disarm('lease'), intent.arm('cancel', 12_000 + 60_000)]);
  });
});

/** One event of every type a job accepts, from the owner, with deadline ids the job once armed. */
function everyEvent(at: number): JobEvent[] {
  const timer = (kind: string) => ({ deadlineId: `build#${kind}`, dueAt: at, at });
  return [
    { type: 'job.release', at },
    { type: 'job.gate', reason: GATE, at },
    { type: 'job.skip', reason: 'upstream failed', at },
    cancel(at, false),
    cancel(at, true),
    { type: 'concurrency.granted', at },
    { type: 'concurrency.queued', position: 1, at },
    granted(at),
    { type: 'placement.none', reason: { kind: 'capacity', message: 'busy' }, at },
    { type: 'placement.refused', message: 'queue full', at },
    { type: 'provision.failed', message: 'spawn failed', at },
    ack(at),
    reject(at),
    status('running', at),
    status('success', at),
    status('failed', at),
    status('cancelled', at),
    heartbeat(at),
    stepStatus(at),
    reclaim(at),
    disconnected(at),
    { type: 'timer.ack.expired', ...timer('ack') },
    { type: 'timer.lease.expired', ...timer('lease') },
    { type: 'timer.recovery.expired', ...timer('recovery') },
    { type: 'timer.queue.expired', ...timer('queue') },
    { type: 'timer.cancel.expired', ...timer('cancel') },
    { type: 'timer.jobTimeout.expired', ...timer('jobTimeout') },
  ];
}

describe('job machine: terminal is final (G-2)', () => {
  const finals: Array<[string, () => JobSnapshot]> = [
    ['success', () => stepJob(startedJob(), status('success', 9_000))[0]],
    ['failed', () => stepJob(startedJob(), status('failed', 9_000))[0]],
    ['cancelled', () => stepJob(queuedJob(), cancel(9_000, false))[0]],
    ['skipped', () => stepJob(startJob(jobInput({ gate: GATE }))[0], { type: 'job.skip', reason: 'upstream failed', at: 9_000 })[0]],
    ['timed_out_stale', () => stepJob(startedJob(), expiry(startedJob(), 'lease'))[0]],
    ['drift_dropped', () => stepJob(startedJob(), status('drift_dropped', 9_000))[0]],
  ];

  for (const [name, reach] of finals) {
    it(`${name}: every event type leaves it unchanged and records nothing`, () => {
      const final = reach();
      assert.equal(final.value, name);
      assert.equal(final.status, 'done');
      assert.deepEqual(final.context.deadlines, {}, 'a final job holds no deadline');
      for (const event of everyEvent(T.running + 1_000_000)) {
        const [next, intents] = stepJob(final, event);
        assert.equal(next.value, name, event.type);
        assert.equal(next.status, 'done', event.type);
        assert.deepEqual(next.context, final.context, event.type);
        assert.deepEqual(intents, [], event.type);
      }
    });
  }

  it('the owner is still known after the end, so late messages can be attributed', () => {
    const [ended] = stepJob(startedJob(), status('success', 9_000));
    assert.deepEqual(ended.context.assignment, { ...OWNER, agentKind: 'static' });
  });
});
