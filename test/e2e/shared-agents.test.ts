import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, afterEach, before, describe, it } from 'node:test';
import { skipReason } from '../support/database.ts';
import { CoordinatorClient, FakeAgent, dropDatabase, runStepsWorkflow } from '../support/fake-agent.ts';
import { ADMIN_TOKEN, after as processCleanups, sharedDatabaseUrl, startCoordinatorProcess, stopProcess } from '../support/processes.ts';
import type { CoordinatorProcess } from '../support/processes.ts';
import { eventually } from '../support/runtime.ts';

/** Short leases so a killed coordinator is adopted within seconds; a graceful stop waits 1 s (not 30) for running jobs. */
const ENV = { SWITCHYARD_LEASE_RENEW_MS: '300', SWITCHYARD_LEASE_TTL_MS: '1500', SWITCHYARD_SCALERS: 'none', SWITCHYARD_SHUTDOWN_DRAIN_MS: '1000' };

async function owner(client: CoordinatorClient, runId: string): Promise<string | null> {
  const view = await client.json<{ owner: { coordinator_id: string } | null }>(`/api/v1/runs/${runId}`);
  return view.owner?.coordinator_id ?? null;
}

describe('agents shared by coordinators on one database (real processes)', { skip: await skipReason('external') }, () => {
  let databaseUrl: string;
  let a: CoordinatorProcess;
  let b: CoordinatorProcess;
  let clientA: CoordinatorClient;
  let clientB: CoordinatorClient;
  let token: string;
  const agents: FakeAgent[] = [];

  before(async () => {
    databaseUrl = await sharedDatabaseUrl('external');
    a = await startCoordinatorProcess({ DATABASE_URL: databaseUrl, SWITCHYARD_COORDINATOR_ID: 'coord-a', ...ENV });
    b = await startCoordinatorProcess({ DATABASE_URL: databaseUrl, SWITCHYARD_COORDINATOR_ID: 'coord-b', ...ENV });
    clientA = new CoordinatorClient(a.url, ADMIN_TOKEN);
    clientB = new CoordinatorClient(b.url, ADMIN_TOKEN);
    token = (await clientA.createToken()).token;
  });
  afterEach(async () => {
    for (const agent of agents.splice(0)) await agent.close();
  });
  after(async () => {
    await stopProcess(a);
    await stopProcess(b);
    await dropDatabase(databaseUrl);
    for (const fn of processCleanups.splice(0)) await fn();
  });

  async function agentOn(client: CoordinatorClient, label: string): Promise<FakeAgent> {
    const agent = await FakeAgent.connect(client.wsUrl, token, { labels: [label], agentId: `shared-${label}` });
    agents.push(agent);
    return agent;
  }

  /** The run's job `build` dispatched to `agent`, acked and reported running, as `client` shows it. */
  async function runningOn(agent: FakeAgent, client: CoordinatorClient, runId: string): Promise<{ runId: string; jobId: string }> {
    const dispatch = await agent.dispatch(0, 20_000);
    const attempt = { runId: dispatch.runId, jobId: dispatch.jobId };
    agent.ack(attempt);
    agent.status(attempt, 'running');
    await client.waitForJob(runId, 'build', (j) => j.status === 'running', 20_000, 'running');
    return attempt;
  }

  /** `agent` connects again, to B, still running `attempt`: the job is reclaimed there and succeeds. */
  async function reclaimedOnB(agent: FakeAgent, label: string, attempt: { runId: string; jobId: string }, runId: string): Promise<void> {
    const back = await FakeAgent.connect(clientB.wsUrl, token, { labels: [label], agentId: agent.agentId, inFlightJobs: [attempt] });
    agents.push(back);
    await clientB.waitForJob(runId, 'build', (j) => j.status === 'running', 20_000, 'the job reclaimed on B');
    back.status(attempt, 'success');
    await clientB.waitForRunStatus(runId, 'success', 20_000);
  }

  async function restartA(): Promise<void> {
    a = await startCoordinatorProcess({ DATABASE_URL: databaseUrl, SWITCHYARD_COORDINATOR_ID: 'coord-a', ...ENV });
    clientA = new CoordinatorClient(a.url, ADMIN_TOKEN);
  }

  it('a run owned by A runs on an idle agent connected only to B: dispatch, statuses and the slot cross over', async () => {
    const label = `only-b-${randomUUID().slice(0, 8)}`;
    const agent = await agentOn(clientB, label);
    const runId = await clientA.createRun(runStepsWorkflow('cross', label, [{ name: 'build', steps: [['s', 'true']] }, { name: 'test', needs: ['build'], steps: [['s', 'true']] }]));
    assert.equal(await owner(clientA, runId), 'coord-a');
    for (const index of [0, 1]) {
      const dispatch = await agent.dispatch(index, 20_000);
      agent.runAtOnce({ runId: dispatch.runId, jobId: dispatch.jobId });
    }
    const view = await clientA.waitForRunStatus(runId, 'success', 20_000);
    assert.deepEqual(view.jobs.map((j) => [j.job_key, j.status, j.agent_id]), [
      ['build', 'success', agent.agentId],
      ['test', 'success', agent.agentId],
    ]);
    assert.equal(await owner(clientA, runId), 'coord-a', 'the run never moved');
  });

  it('a busy agent on B gets the next job once its slot is freed by A, the run’s owner', async () => {
    const label = `slot-${randomUUID().slice(0, 8)}`;
    const agent = await agentOn(clientB, label);
    const first = await clientA.createRun(runStepsWorkflow('first', label, [{ name: 'build', steps: [['s', 'true']] }]));
    const second = await clientA.createRun(runStepsWorkflow('second', label, [{ name: 'build', steps: [['s', 'true']] }]));
    const one = await agent.dispatch(0, 20_000);
    const other = one.runId === first ? second : first;
    await clientA.waitForJob(other, 'build', (j) => j.status === 'pending' && j.waiting_reason !== null, 20_000, 'the other job to wait, with a reason');
    assert.equal(agent.types().filter((t) => t === 'job.dispatch').length, 1, 'nothing more is dispatched while the slot is held');
    for (const client of [clientA, clientB]) {
      const { agents } = await client.json<{ agents: { agentId: string; jobs: { runId: string; jobKey: string }[] }[] }>('/api/v1/agents');
      assert.deepEqual(agents.find((a) => a.agentId === agent.agentId)?.jobs, [{ runId: one.runId, jobKey: 'build' }], 'each coordinator lists the job the agent runs');
    }
    agent.runAtOnce({ runId: one.runId, jobId: one.jobId });
    const two = await agent.dispatch(1, 20_000);
    assert.equal(two.runId, other, 'the freed slot goes to the waiting job');
    agent.runAtOnce({ runId: two.runId, jobId: two.jobId });
    for (const runId of [first, second]) {
      const view = await clientA.waitForRunStatus(runId, 'success', 20_000);
      assert.deepEqual(view.jobs.map((j) => [j.job_key, j.status, j.agent_id]), [['build', 'success', agent.agentId]]);
    }
  });

  it('kill -9 of the owner: B adopts the run and its job on B’s agent finishes there', async () => {
    const label = `adopt-${randomUUID().slice(0, 8)}`;
    const agent = await agentOn(clientB, label);
    const runId = await clientA.createRun(runStepsWorkflow('adopted', label, [{ name: 'build', steps: [['s', 'true']] }]));
    const attempt = await runningOn(agent, clientB, runId);
    a.child.kill('SIGKILL');
    await a.exited;
    await eventually(async () => (await owner(clientB, runId)) === 'coord-b', 20_000, 'B to adopt the run');
    agent.status(attempt, 'success');
    const view = await clientB.waitForRunStatus(runId, 'success', 20_000);
    assert.equal(view.jobs[0]?.agent_id, agent.agentId);
    await restartA();
  });

  it('a graceful stop of the owner releases its lease: a peer adopts at once, and the agent fails over to it', async () => {
    const label = `release-${randomUUID().slice(0, 8)}`;
    const agent = await agentOn(clientA, label);
    const runId = await clientA.createRun(runStepsWorkflow('released', label, [{ name: 'build', steps: [['s', 'true']] }]));
    const attempt = await runningOn(agent, clientA, runId);
    await stopProcess(a, 'SIGTERM');
    await eventually(async () => (await owner(clientB, runId)) === 'coord-b', 5_000, 'B to adopt the released runs well within a lease TTL');
    await reclaimedOnB(agent, label, attempt, runId);
    await restartA();
  });

  it('kill -9 of a coordinator holding only the agent: the peer owning the run ends its lease at once, the job goes recovering, and finishes once the agent reconnects to the peer', async () => {
    const label = `holder-${randomUUID().slice(0, 8)}`;
    const agent = await agentOn(clientA, label);
    const runId = await clientB.createRun(runStepsWorkflow('held', label, [{ name: 'build', steps: [['s', 'true']] }]));
    const attempt = await runningOn(agent, clientB, runId);
    a.child.kill('SIGKILL');
    await a.exited;
    await eventually(() => /its lease is ended; it owned no live run/.test(b.output()), 10_000, 'B to end the lease of A, which owned no live run');
    await clientB.waitForJob(runId, 'build', (j) => j.status === 'recovering', 20_000, 'the job on the lost agent to go recovering');
    await reclaimedOnB(agent, label, attempt, runId);
    await restartA();
  });
});
