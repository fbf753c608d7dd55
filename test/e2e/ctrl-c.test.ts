import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { CoordinatorClient, FakeAgent, runStepsWorkflow } from '../support/fake-agent.ts';
import { tempDir } from '../support/database.ts';
import { ADMIN_TOKEN, after as processCleanups, startCoordinatorProcess, stopProcess } from '../support/processes.ts';
import { eventually } from '../support/runtime.ts';

const LINES = 15;

async function postmasterAlive(dataDir: string): Promise<boolean> {
  const pid = Number((await readFile(join(dataDir, 'postgres', 'postmaster.pid'), 'utf8').catch(() => '')).split('\n')[0]);
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

describe('Ctrl-C in the terminal that runs npm start on the embedded default', () => {
  // Regression (issue "Runs for months"): the terminal's SIGINT reached the embedded Postgres in the same
  // process group; it stopped at once, the coordinator drained without a database and dropped 11 of 15 log lines.
  it('the job running then finishes, every log line it printed is stored, and Postgres stops last, not before', async (t) => {
    t.after(async () => {
      for (const cleanup of processCleanups.splice(0)) await cleanup();
    });
    const dataDir = await tempDir('sy-ctrl-c-');
    const env = { SWITCHYARD_DATA_DIR: dataDir, SWITCHYARD_AGENT_AUTH: 'none', SWITCHYARD_SHUTDOWN_DRAIN_MS: '20000', SWITCHYARD_SCALERS: '[]' };
    const coordinator = await startCoordinatorProcess(env, { ownProcessGroup: true });
    const client = new CoordinatorClient(coordinator.url, ADMIN_TOKEN);
    // The ready line says, once, where to look next (issue "The first hour").
    await eventually(() => coordinator.output().includes('coordinator ready'), 5_000, 'the ready line');
    assert.equal(coordinator.output().match(/coordinator ready: open the runs page/g)?.length, 1, coordinator.output());
    assert.match(coordinator.output(), new RegExp(`${coordinator.url.replace(/[.]/g, '\\.')}/runs/`));
    assert.match(coordinator.output(), /SWITCHYARD_ADMIN_TOKEN|admin-token/);
    const agent = await FakeAgent.connect(client.wsUrl, null, { labels: ['ctrl-c'], heartbeatMs: 1000 });
    t.after(() => agent.close());
    const runId = await client.createRun(runStepsWorkflow('ctrl-c', 'ctrl-c', [{ name: 'build', steps: [['print', 'for i in $(seq 15); do echo $i; sleep 1; done']] }]));
    const dispatch = await agent.dispatch(0);
    agent.ack(dispatch);
    agent.status(dispatch, 'running');
    agent.step(dispatch, 0, 'print', 'running');
    agent.log(dispatch, 0, ['line 1']);
    assert.ok(await postmasterAlive(dataDir));

    process.kill(-(coordinator.child.pid ?? 0), 'SIGINT');
    for (let line = 2; line <= LINES; line++) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      agent.log(dispatch, 0, [`line ${line}`]);
    }
    assert.ok(await postmasterAlive(dataDir), 'Postgres is still up while the coordinator drains');
    agent.step(dispatch, 0, 'print', 'success');
    agent.status(dispatch, 'success', { durationMs: 1500 });
    assert.equal(await coordinator.exited, 0);
    assert.equal(await postmasterAlive(dataDir), false, 'Postgres stopped with the coordinator, none left behind');
    assert.doesNotMatch(coordinator.output(), /could not be stored|dropped/);

    const again = await startCoordinatorProcess(env);
    t.after(() => stopProcess(again));
    const reopened = new CoordinatorClient(again.url, ADMIN_TOKEN);
    const job = await reopened.waitForJob(runId, 'build', (j) => j.status === 'success', 20_000, 'success after the restart');
    assert.equal(job.status, 'success');
    const lines = await eventually(async () => {
      const stored = (await reopened.logs(runId)).flatMap((chunk) => chunk.lines);
      return stored.length >= LINES ? stored : undefined;
    }, 10_000, 'every line');
    assert.deepEqual(lines, Array.from({ length: LINES }, (_, i) => `line ${i + 1}`));
    // Stopped as an operator would, so it stops its Postgres: the cleanups' SIGKILL left that Postgres running.
    await stopProcess(again);
    assert.equal(await postmasterAlive(dataDir), false, 'the restarted coordinator stopped its Postgres too');
  });

  it('a second Ctrl-C stops at once, still stopping Postgres: none is left behind', async (t) => {
    t.after(async () => {
      for (const cleanup of processCleanups.splice(0)) await cleanup();
    });
    const dataDir = await tempDir('sy-ctrl-c-twice-');
    const coordinator = await startCoordinatorProcess({ SWITCHYARD_DATA_DIR: dataDir, SWITCHYARD_AGENT_AUTH: 'none', SWITCHYARD_SHUTDOWN_DRAIN_MS: '60000', SWITCHYARD_SCALERS: '[]' }, { ownProcessGroup: true });
    const client = new CoordinatorClient(coordinator.url, ADMIN_TOKEN);
    const agent = await FakeAgent.connect(client.wsUrl, null, { labels: ['twice'], heartbeatMs: 1000 });
    t.after(() => agent.close());
    await client.createRun(runStepsWorkflow('twice', 'twice', [{ name: 'build', steps: [['wait', 'sleep 600']] }]));
    const dispatch = await agent.dispatch(0);
    agent.ack(dispatch);
    agent.status(dispatch, 'running');
    const group = -(coordinator.child.pid ?? 0);
    process.kill(group, 'SIGINT');
    await eventually(() => coordinator.output().includes('draining'), 10_000, 'the drain');
    process.kill(group, 'SIGINT');
    assert.equal(await coordinator.exited, 0);
    assert.match(coordinator.output(), /second signal: stopping without waiting for running jobs/);
    assert.match(coordinator.output(), /stopping with jobs still running/, 'it stopped with the job running, not at the end of the 60 s drain');
    assert.equal(await postmasterAlive(dataDir), false);
  });
});
