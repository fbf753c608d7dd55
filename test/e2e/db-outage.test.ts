import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { CoordinatorClient, FakeAgent, runStepsWorkflow } from '../support/fake-agent.ts';
import { tempDir } from '../support/database.ts';
import { ADMIN_TOKEN, after as processCleanups, startCoordinatorProcess } from '../support/processes.ts';
import { eventually } from '../support/runtime.ts';

const OUTAGE_MS = 20_000;

/** The embedded Postgres's processes: the postmaster and its children (backends, writer, checkpointer…). */
async function postgresPids(dataDir: string): Promise<number[]> {
  const postmaster = Number((await readFile(join(dataDir, 'postgres', 'postmaster.pid'), 'utf8')).split('\n')[0]);
  const children = execFileSync('pgrep', ['-P', String(postmaster)], { encoding: 'utf8' }).trim().split('\n').filter(Boolean).map(Number);
  return [postmaster, ...children];
}

const signalAll = (pids: readonly number[], signal: NodeJS.Signals) => pids.forEach((pid) => process.kill(pid, signal));

describe('the database paused for 20 s under a running job (issue "Runs for months")', () => {
  it('every log line, the step result and the job status the agent sent meanwhile are stored once it answers again', async (t) => {
    t.after(async () => {
      for (const cleanup of processCleanups.splice(0)) await cleanup();
    });
    const dataDir = await tempDir('sy-db-outage-');
    const coordinator = await startCoordinatorProcess({ SWITCHYARD_DATA_DIR: dataDir, SWITCHYARD_AGENT_AUTH: 'none', SWITCHYARD_SCALERS: '[]' });
    const client = new CoordinatorClient(coordinator.url, ADMIN_TOKEN);
    const agent = await FakeAgent.connect(client.wsUrl, null, { labels: ['outage'], heartbeatMs: 1000 });
    t.after(() => agent.close());
    const runId = await client.createRun(runStepsWorkflow('outage', 'outage', [{ name: 'build', steps: [['print', 'for i in $(seq 25); do echo $i; sleep 1; done']] }]));
    const dispatch = await agent.dispatch(0);
    agent.ack(dispatch);
    agent.status(dispatch, 'running');
    agent.step(dispatch, 0, 'print', 'running');
    agent.log(dispatch, 0, ['line 1']);
    await client.waitForJob(runId, 'build', (job) => job.status === 'running', 10_000, 'running');

    const pids = await postgresPids(dataDir);
    signalAll(pids, 'SIGSTOP'); // paused: connections stay open, nothing answers (a hung or failing-over database)
    const paused = Date.now();
    t.after(() => signalAll(pids, 'SIGCONT'));
    const lines = Math.floor(OUTAGE_MS / 1000) - 2;
    for (let line = 2; line <= lines; line++) {
      await new Promise((resolve) => setTimeout(resolve, 1000));
      agent.log(dispatch, 0, [`line ${line}`]);
    }
    agent.step(dispatch, 0, 'print', 'success');
    agent.status(dispatch, 'success', { durationMs: OUTAGE_MS });
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, OUTAGE_MS - (Date.now() - paused))));
    signalAll(pids, 'SIGCONT');

    const job = await client.waitForJob(runId, 'build', (j) => j.status === 'success', 60_000, 'the job to be stored green');
    assert.deepEqual(job.steps?.map((step) => [step.name, step.status]), [['print', 'success']]);
    assert.equal((await client.run(runId)).run.status, 'success');
    const stored = await eventually(async () => {
      const all = (await client.logs(runId)).flatMap((chunk) => chunk.lines);
      return all.length >= lines ? all : undefined;
    }, 20_000, 'every line');
    assert.deepEqual(stored, Array.from({ length: lines }, (_, i) => `line ${i + 1}`));
    assert.doesNotMatch(coordinator.output(), /could not be stored; dropped|gave up/);
  });
});
