import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, it } from 'node:test';
import { coordinatorSuite } from '../../support/coordinator-suite.ts';
import { skipReason } from '../../support/database.ts';
import { runStepsWorkflow, type FakeAgent, type JobDispatchFrame } from '../../support/fake-agent.ts';

/** A workflow whose group function the agent evaluates (`concurrency.hasGroup`), as `kici compile` writes it. */
function grouped(name: string, label: string, cancelInProgress: boolean): object {
  return { ...runStepsWorkflow(name, label, [{ name: 'deploy', steps: [['ship', 'true']] }]), concurrency: { hasGroup: true, cancelInProgress } };
}

/** The agent takes its next job and reports the workflow's group, as the stock agent does before the first step. */
async function reportGroup(agent: FakeAgent, index: number): Promise<{ dispatch: JobDispatchFrame; requestId: string }> {
  const dispatch = await agent.dispatch(index);
  const attempt = { runId: dispatch.runId, jobId: dispatch.jobId };
  agent.ack(attempt);
  agent.status(attempt, 'running');
  const requestId = randomUUID();
  agent.send({ type: 'job.concurrency.report', messageId: requestId, runId: dispatch.runId, jobId: dispatch.jobId, group: 'deploy-main' });
  return { dispatch, requestId };
}

const ackOf = (agent: FakeAgent, requestId: string, action: string) => agent.next('job.concurrency.ack', (m) => m.requestId === requestId && m.action === action);

// Regression: `concurrency` of a workflow was answered `proceed` whatever the group held: two deploys ran at once.
describe('a workflow’s own concurrency group, enforced across runs (real coordinator process)', { skip: await skipReason('external') }, () => {
  const suite = coordinatorSuite('external');

  it('cancelInProgress false: the second run waits for the first to end, then proceeds on the same request id', async () => {
    const label = `group-${randomUUID().slice(0, 8)}`;
    const one = await suite.connect({ labels: [label] });
    const first = await suite.client.createRun(grouped('deploy-a', label, false));
    const a = await reportGroup(one, 0);
    await ackOf(one, a.requestId, 'proceed');
    const two = await suite.connect({ labels: [label] });
    const second = await suite.client.createRun(grouped('deploy-b', label, false));
    const b = await reportGroup(two, 0);
    const waiting = await ackOf(two, b.requestId, 'wait');
    assert.equal(waiting.reason, 'waiting for concurrency group acme/app::deploy-main (position 1)');
    assert.equal(two.types().filter((t) => t === 'job.concurrency.ack').length, 1, 'nothing more until the first run ends');
    one.status({ runId: a.dispatch.runId, jobId: a.dispatch.jobId }, 'success');
    await suite.client.waitForRunStatus(first, 'success');
    const proceed = await ackOf(two, b.requestId, 'proceed');
    assert.equal(proceed.jobId, b.dispatch.jobId);
    two.status({ runId: b.dispatch.runId, jobId: b.dispatch.jobId }, 'success');
    await suite.client.waitForRunStatus(second, 'success');
  });

  it('cancelInProgress true: a newer run supersedes the run holding the group, which is cancelled with the reason', async () => {
    const label = `supersede-${randomUUID().slice(0, 8)}`;
    const one = await suite.connect({ labels: [label] });
    const older = await suite.client.createRun(grouped('deploy-old', label, true));
    const a = await reportGroup(one, 0);
    await ackOf(one, a.requestId, 'proceed');
    const two = await suite.connect({ labels: [label] });
    const newer = await suite.client.createRun(grouped('deploy-new', label, true));
    const b = await reportGroup(two, 0);
    await ackOf(two, b.requestId, 'proceed');
    const cancel = await one.next('job.cancel', (m) => m.jobId === a.dispatch.jobId);
    assert.equal(cancel.reason, `superseded by run ${newer} in concurrency group acme/app::deploy-main`);
    one.status({ runId: a.dispatch.runId, jobId: a.dispatch.jobId }, 'cancelled');
    const view = await suite.client.waitForRunStatus(older, 'cancelled');
    assert.equal(view.run.failure_reason, `Cancelled: superseded by run ${newer} in concurrency group acme/app::deploy-main`);
    two.status({ runId: b.dispatch.runId, jobId: b.dispatch.jobId }, 'success');
    await suite.client.waitForRunStatus(newer, 'success');
  });

  it('a report about a job the agent does not hold is told to cancel at once', async () => {
    const agent = await suite.connect({ labels: [`stranger-${randomUUID().slice(0, 8)}`] });
    const requestId = randomUUID();
    agent.send({ type: 'job.concurrency.report', messageId: requestId, runId: randomUUID(), jobId: randomUUID(), group: 'deploy-main' });
    const answer = await ackOf(agent, requestId, 'cancel');
    assert.match(answer.reason ?? '', /is not an attempt this agent holds$/);
  });
});
