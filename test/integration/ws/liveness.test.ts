import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, it } from 'node:test';
import { skipReason } from '../../support/database.ts';
import { coordinatorSuite } from '../../support/coordinator-suite.ts';
import { FakeAgent, runStepsWorkflow } from '../../support/fake-agent.ts';
import { eventually } from '../../support/runtime.ts';

/** The silence threshold (90 s by default, protocol.md#liveness) cut to 5 s: the watch looks every 556 ms. */
const SILENT_MS = 5_000;

describe('agent liveness (external Postgres, real seconds)', { skip: await skipReason('external') }, () => {
  const suite = coordinatorSuite('external', { env: { SWITCHYARD_AGENT_SILENT_MS: String(SILENT_MS) } });

  // Regression: a silent agent that heartbeats again was usable but never offered the jobs waiting for it.
  it('an agent silent past the threshold gets no new job; its next heartbeat puts it back in service and the waiting job is dispatched', async () => {
    const label = `silent-${randomUUID().slice(0, 8)}`;
    const { token } = await suite.client.createToken();
    const connecting = Date.now();
    const agent = await FakeAgent.connect(suite.client.wsUrl, token, { labels: [label], heartbeatMs: 0 });
    const unhealthy = (line: string) => line.includes('agent unhealthy: no heartbeat') && line.includes(agent.agentId);
    await eventually(() => suite.coordinator.output().split('\n').some(unhealthy), 4 * SILENT_MS, 'the coordinator to mark the agent unhealthy');
    assert.ok(Date.now() - connecting >= SILENT_MS, 'not before the threshold');

    const runId = await suite.client.createRun(runStepsWorkflow(`wf-${label}`, label, [{ name: 'build', steps: [['step', 'true']] }]));
    const waiting = await suite.client.waitForJob(runId, 'build', (j) => j.status === 'pending' && j.outcome === null, 5_000, 'waiting');
    assert.equal(agent.types().filter((t) => t === 'job.dispatch').length, 0, 'no dispatch to an unhealthy agent');
    assert.ok(waiting.job_key === 'build');

    agent.send({ type: 'heartbeat', timestamp: Date.now() });
    const dispatch = await agent.dispatch(0, 5_000);
    agent.runAtOnce(dispatch);
    await suite.client.waitForRunStatus(runId, 'success', 5_000);
    assert.ok(agent.isOpen);
    await agent.close();
  });
});
