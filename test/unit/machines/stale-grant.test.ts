import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { JobSnapshot } from '../../../machines/job.machine.ts';
import {
  RunHarness,
  acceptedJob,
  cancel,
  disconnected,
  dispatchedJob,
  granted,
  intent,
  jobInput,
  jobPlan,
  queuedJob,
  startJob,
  startedJob,
  stepJob,
} from '../../support/machines.ts';

const STALE = { agentId: 'agent-2', dispatchId: 'dispatch-stale' };

/** A job resting in each state that does not wait for an agent. */
function notWaiting(): Record<string, JobSnapshot> {
  return {
    'waiting.gated': startJob(jobInput({ gate: { kind: 'needs', message: 'waiting for upstream jobs: a' } }))[0],
    'waiting.concurrency': startJob(jobInput({ concurrency: { key: 'acme::deploy', policy: { cancelInProgress: false, max: 1 } } }))[0],
    'assigned.dispatched': dispatchedJob(),
    'assigned.running.accepted': acceptedJob(),
    'assigned.running.started': startedJob(),
    'assigned.cancelling': stepJob(startedJob(), cancel(3_000, false))[0],
    'recovering.beforeStart': stepJob(acceptedJob(), disconnected(3_000))[0],
    'recovering.afterStart': stepJob(startedJob(), disconnected(3_000))[0],
  };
}

describe('a grant the job no longer waits for: its slot goes back (DSP-2)', () => {
  it('every state that does not wait for an agent releases the granted slot itself and stays put', () => {
    for (const [state, job] of Object.entries(notWaiting())) {
      const [same, intents] = stepJob(job, granted(4_000, STALE));
      assert.deepEqual(same.value, job.value, state);
      assert.deepEqual(same.context, job.context, state);
      assert.deepEqual(intents, [intent.releaseSlot(STALE)], state);
    }
  });

  it('a job waiting for an agent takes the grant', () => {
    const [dispatched, intents] = stepJob(queuedJob(), granted(4_000, STALE));
    assert.deepEqual(dispatched.value, { assigned: { dispatched: 'awaitingAck' } });
    assert.ok(!intents.some((i) => i.type === 'releaseSlot'));
  });

  it('a grant for a job that has ended is released by the run', () => {
    const h = RunHarness.start([jobPlan('build'), jobPlan('test')]);
    h.runToEnd('build', 'success', 2_000);
    h.take();
    h.send({ ...granted(5_000, STALE), jobKey: 'build' });
    assert.deepEqual(h.take(), [{ by: 'run', type: 'releaseSlot', params: STALE }]);
  });
});
