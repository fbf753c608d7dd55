import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { findFreePort } from '../../../src/db/free-port.ts';
import { skipReason } from '../../support/database.ts';
import { CoordinatorClient, dropDatabase } from '../../support/fake-agent.ts';
import { KiciTestAgent } from '../../support/kici-agent.ts';
import { hold } from '../../support/kici-agent-scripts.ts';
import { ADMIN_TOKEN, after as processCleanups, sharedDatabaseUrl, startCoordinatorProcess, stopProcess } from '../../support/processes.ts';
import type { CoordinatorProcess } from '../../support/processes.ts';

const REPLAY_GRACE_MS = 3_000;
const held = { name: 'restart', jobs: [{ _type: 'static', name: 'held', runsOn: [{ kind: 'exact', value: 'kici:os:linux' }], needs: [], steps: [{ name: 'wait', hasOutputs: false }] }] };

/**
 * kill -9 of the coordinator while a stock-protocol agent runs a job. The agent keeps what it could not
 * send and replays it after its next register.ack, without listing a job that ended meanwhile.
 */
describe('a coordinator killed -9 under a running job (real process, stock-protocol agent)', { skip: await skipReason('external') }, () => {
  const databases: string[] = [];
  after(async () => {
    for (const url of databases) await dropDatabase(url);
    for (const fn of processCleanups.splice(0)) await fn();
  });

  async function runningJob() {
    const databaseUrl = await sharedDatabaseUrl('external');
    databases.push(databaseUrl);
    const settings = { PORT: String(await findFreePort()), DATABASE_URL: databaseUrl, SWITCHYARD_COORDINATOR_ID: 'restarting', SWITCHYARD_SCALERS: 'none', SWITCHYARD_REPLAY_GRACE_MS: String(REPLAY_GRACE_MS) };
    const coordinator = await startCoordinatorProcess(settings);
    const client = new CoordinatorClient(coordinator.url, ADMIN_TOKEN);
    const { token } = await client.createToken();
    const url = `${coordinator.url.replace('http', 'ws')}/ws`;
    const agent = new KiciTestAgent({ url, token, labels: ['lab'], script: () => hold(), reconnectBaseMs: 100, paceMs: 0 });
    await agent.start();
    const runId = await client.createRun(held);
    const dispatch = await agent.nextDispatch();
    await client.waitForJob(runId, 'held', (j) => j.status === 'running', 20_000, 'running');
    coordinator.child.kill('SIGKILL');
    await coordinator.exited;
    await agent.waitForState('disconnected');
    return { settings, url, token, agent, runId, jobId: dispatch.jobId };
  }

  async function restart(settings: Record<string, string>): Promise<{ restarted: CoordinatorProcess; client: CoordinatorClient }> {
    const restarted = await startCoordinatorProcess(settings);
    return { restarted, client: new CoordinatorClient(restarted.url, ADMIN_TOKEN) };
  }

  // Regression: the job was failed "agent restarted without the job" at register, and its success, received just before, dropped.
  it('B5: a job that ends as the agent reconnects is green: its status, sent on the new socket before agent.register, is applied', async () => {
    const { settings, agent, runId, jobId } = await runningJob();
    // As the stock agent does: the terminal job.status goes out on any open socket, registered or not,
    // and the job leaves the agent's in-flight list before its agent.register is written.
    agent.whenState('authenticating', () => agent.finish(jobId));
    const { restarted, client } = await restart(settings);
    try {
      const view = await client.waitForRun(runId, (v) => v.run.status !== 'pending' && v.run.status !== 'running', 30_000, 'the run to end');
      assert.equal(view.run.status, 'success', JSON.stringify(view.jobs));
      assert.deepEqual(view.jobs.map((j) => [j.job_key, j.status, j.attempt]), [['held', 'success', 1]]);
      const register = agent.sent.filter((frame) => frame.type === 'agent.register').at(-1);
      assert.deepEqual(register?.['inFlightJobs'] ?? [], [], 'the agent did not list the job it had just finished');
      assert.ok(agent.sent.indexOf(register ?? { type: '' }) > agent.sent.findIndex((f) => f.type === 'job.status' && f['state'] === 'success'), 'its status went out before the register');
      assert.deepEqual(agent.closes.filter((c) => c.code !== 1006), [], 'no socket was closed by the coordinator (1006: the kill, and connects refused while it was down)');
    } finally {
      await agent.close();
      await stopProcess(restarted);
    }
  });

  it('an agent that restarted too (nothing to replay) has the job failed once the replay grace passes, saying what happened', async () => {
    const { settings, url, token, agent, runId } = await runningJob();
    await agent.close();
    const { restarted, client } = await restart(settings);
    const fresh = new KiciTestAgent({ url, token, labels: ['lab'], agentId: agent.agentId, script: () => hold() });
    try {
      const registered = Date.now();
      await fresh.start();
      const view = await client.waitForRunStatus(runId, 'failed', 30_000);
      assert.equal(view.jobs[0]?.outcome, `agent ${agent.agentId} reconnected after the coordinator restarted and did not report job held`);
      assert.ok(Date.now() - registered >= REPLAY_GRACE_MS - 500, 'not before the replay grace');
    } finally {
      await fresh.close();
      await stopProcess(restarted);
    }
  });
});
