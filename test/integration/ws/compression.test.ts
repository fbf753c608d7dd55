import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { skipReason } from '../../support/database.ts';
import { coordinatorSuite } from '../../support/coordinator-suite.ts';
import { runStepsWorkflow } from '../../support/fake-agent.ts';
import { RawWebSocket } from '../../support/raw-websocket.ts';

describe('agent compression off, the default (external Postgres)', { skip: await skipReason('external') }, () => {
  const suite = coordinatorSuite('external');

  it("declines the agent's permessage-deflate offer in the handshake", async () => {
    const socket = await RawWebSocket.open(suite.client.wsUrl);
    try {
      assert.doesNotMatch(socket.extensions, /permessage-deflate/, 'no extension is accepted');
    } finally {
      socket.close();
    }
  });

  it('an agent that offers compression still connects and runs a job to success, every frame uncompressed', async () => {
    const agent = await suite.connect({ labels: ['plain'] });
    const runId = await suite.client.createRun(runStepsWorkflow('wf-plain', 'plain', [{ name: 'build', steps: [['step', 'true']] }]));
    const dispatch = await agent.dispatch(0);
    agent.runAtOnce({ runId: dispatch.runId, jobId: dispatch.jobId });
    const view = await suite.client.waitForRunStatus(runId, 'success');
    assert.deepEqual(
      view.jobs.map((job) => job.status),
      ['success'],
    );
    // Each job's queued and run times, and the run's total (issue "The first hour").
    const [job] = view.jobs as unknown as { queuedMs: number | null; runMs: number | null }[];
    assert.ok(job && typeof job.queuedMs === 'number' && job.queuedMs >= 0, JSON.stringify(job));
    assert.ok(typeof job.runMs === 'number' && job.runMs >= 0);
    const total = (view.run as unknown as { durationMs: number }).durationMs;
    assert.ok(total >= job.queuedMs + job.runMs, `run ${total} ms ≥ queued + ran`);
  });
});
