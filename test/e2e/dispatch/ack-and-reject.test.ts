import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, it } from 'node:test';
import { CLOSE_CODES } from '../../../src/ws/messages.ts';
import { DATABASE_KINDS, skipReason } from '../../support/database.ts';
import { coordinatorSuite } from '../../support/coordinator-suite.ts';
import { runStepsWorkflow, type FakeAgentOptions } from '../../support/fake-agent.ts';

const ENV = { SWITCHYARD_DISPATCH_ACK_TIMEOUT_MS: '1000', SWITCHYARD_MAX_DISPATCH_ATTEMPTS: '5' };


for (const kind of DATABASE_KINDS) {
  describe(`dispatch ack, reject and instant answers with scripted agents (${kind} Postgres)`, { skip: await skipReason(kind) }, () => {
    const suite = coordinatorSuite(kind, { env: ENV });
    const { connect } = suite;

    function oneJob(label: string, name = 'build'): object {
      return runStepsWorkflow(`wf-${label}`, label, [{ name, steps: [['step', 'true']] }]);
    }

    it('ack timeout: job.cancel {force, "dispatch ack timeout"}, close 4031, and the requeued attempt 2 runs on the reconnected agent', async () => {
      const label = `ack-${randomUUID().slice(0, 8)}`;
      const agentId = `silent-${label}`;
      const silent = await connect({ labels: [label], agentId });
      const runId = await suite.client.createRun(oneJob(label));
      const first = await silent.dispatch(0);
      const cancel = await silent.next('job.cancel', (m) => m.jobId === first.jobId, 5_000);
      assert.equal(cancel.force, true);
      assert.equal(cancel.reason, 'dispatch ack timeout');
      assert.equal(cancel.runId, runId);
      const closed = await silent.closed;
      assert.equal(closed.code, CLOSE_CODES.DISPATCH_ACK_TIMEOUT);
      const requeued = await suite.client.waitForJob(runId, 'build', (j) => j.outcome === 'dispatch ack timeout' && j.dispatch_id === null, 5_000, 'requeued');
      assert.equal(requeued.attempt, 1);
      assert.notEqual(requeued.status, 'failed');

      const again = await connect({ labels: [label], agentId });
      const second = await again.dispatch(0);
      assert.notEqual(second.jobId, first.jobId, 'a fresh dispatch id per attempt');
      again.runAtOnce(second);
      const done = await suite.client.waitForRunStatus(runId, 'success', 10_000);
      assert.equal(done.jobs[0]?.attempt, 2);
      const journal = await suite.client.journal(runId);
      const [granted, expired] = journal.filter((e) => e.type === 'timer.ack.expired' || e.type === 'placement.granted');
      assert.deepEqual(journal.filter((e) => e.type === 'timer.ack.expired' || e.type === 'placement.granted').map((e) => e.type), ['placement.granted', 'timer.ack.expired', 'placement.granted']);
      assert.equal(expired?.dueAt, (granted?.at ?? 0) + 1000, 'the ack deadline is armed with the dispatch intent');
      assert.ok((expired?.at ?? 0) >= (expired?.dueAt ?? Infinity), 'and never fires early');
    });

    it('an agent rejecting busy every time: five attempts, then "re-dispatch attempts exhausted after 5 attempts"', async () => {
      const label = `busy-${randomUUID().slice(0, 8)}`;
      const busy = await connect({ labels: [label], onDispatch: (dispatch, agent) => agent.reject(dispatch, 'busy') });
      const runId = await suite.client.createRun(oneJob(label));
      const view = await suite.client.waitForRunStatus(runId, 'failed', 15_000);
      const job = view.jobs[0];
      assert.equal(job?.status, 'failed');
      assert.equal(job?.attempt, 5);
      assert.equal(job?.outcome, 're-dispatch attempts exhausted after 5 attempts');
      const dispatches = busy.received.filter((m) => m.type === 'job.dispatch');
      assert.equal(dispatches.length, 5);
      assert.equal(new Set(dispatches.map((d) => d.jobId)).size, 5, 'each attempt has its own jobId');
      assert.ok(busy.isOpen, 'a reject is not a reason to close the socket');
      const rejects = (await suite.client.journal(runId)).filter((e) => e.type === 'agent.job.reject');
      assert.equal(rejects.length, 5);
    });

    it('B1: ack, running and success in the tick the dispatch arrives: every run succeeds and no slot leaks', async () => {
      const label = `b1-${randomUUID().slice(0, 8)}`;
      await connect({ labels: [label], onDispatch: (dispatch, agent) => agent.runAtOnce(dispatch) });
      const runIds = await Promise.all(Array.from({ length: 20 }, () => suite.client.createRun(oneJob(label))));
      for (const runId of runIds) {
        const view = await suite.client.waitForRunStatus(runId, 'success', 20_000);
        assert.equal(view.jobs[0]?.attempt, 1, 'no attempt was lost and redone');
        const statuses = (await suite.client.journal(runId)).filter((e) => e.type.startsWith('agent.job.')).map((e) => e.state ?? e.type);
        assert.deepEqual(statuses, ['agent.job.ack', 'running', 'success']);
      }
    });

    it('B1: a terminal job.status with no ack before it settles the dispatch and ends the job as reported', async () => {
      const label = `b1t-${randomUUID().slice(0, 8)}`;
      const onDispatch: FakeAgentOptions['onDispatch'] = (dispatch, agent) => agent.status(dispatch, 'failed', { error: 'exit 3' });
      await connect({ labels: [label], onDispatch });
      const runId = await suite.client.createRun(oneJob(label));
      const view = await suite.client.waitForRunStatus(runId, 'failed', 10_000);
      assert.equal(view.jobs[0]?.status, 'failed');
      assert.equal(view.jobs[0]?.attempt, 1);
      assert.equal(view.jobs[0]?.outcome, 'exit 3');
      const success = await suite.client.createRun(oneJob(label));
      await suite.client.waitForRunStatus(success, 'failed', 10_000);
    });
  });
}
