import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, it } from 'node:test';
import { skipReason } from '../../support/database.ts';
import { coordinatorSuite } from '../../support/coordinator-suite.ts';
import { FakeAgent, runStepsWorkflow } from '../../support/fake-agent.ts';

const BACKLOG = 60;

describe('dispatch of a queued backlog (external Postgres)', { skip: await skipReason('external') }, () => {
  const suite = coordinatorSuite('external');

  // Regression: the dispatcher granted waiting jobs one database commit after another (placements/s ≤ 1 / commit latency).
  it('a new agent with free slots takes the whole backlog in a few group commits', async () => {
    const label = `backlog-${randomUUID().slice(0, 8)}`;
    const workflow = runStepsWorkflow(`wf-${label}`, label, [{ name: 'build', steps: [['step', 'true']] }]);
    const runIds: string[] = [];
    for (let i = 0; i < BACKLOG; i++) runIds.push(await suite.client.createRun(workflow));
    const last = runIds.at(-1) ?? '';
    await suite.client.waitForJob(last, 'build', (j) => j.outcome === null && j.status === 'pending', 10_000, 'waiting for an agent');
    const commitsBefore = await suite.client.metric('switchyard_commit_seconds_count');

    const { token } = await suite.client.createToken();
    const agent = await FakeAgent.connect(suite.client.wsUrl, token, { labels: [label], maxConcurrency: BACKLOG });
    await agent.dispatch(BACKLOG - 1, 20_000);
    const commits = (await suite.client.metric('switchyard_commit_seconds_count')) - commitsBefore;
    const placed = new Set(agent.received.flatMap((m) => (m.type === 'job.dispatch' ? [m.runId] : [])));
    assert.equal(placed.size, BACKLOG, 'every queued job, once');
    assert.ok(commits <= BACKLOG / 4, `${BACKLOG} grants took ${commits} commits`);
    await agent.close();
  });
});
