import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { startEmbeddedPostgres } from '../../src/db/embedded-postgres.ts';
import { CoordinatorClient, FakeAgent, runStepsWorkflow } from '../support/fake-agent.ts';
import { tempDir, testLog } from '../support/database.ts';
import { ADMIN_TOKEN, after as processCleanups, startCoordinatorProcess, type CoordinatorProcess } from '../support/processes.ts';
import { eventually } from '../support/runtime.ts';

const OUTAGE_MS = 20_000;
const LINES = OUTAGE_MS / 1000 - 2;

/** The embedded Postgres's processes: the postmaster and its children (backends, writer, checkpointer…). */
async function postgresPids(dataDir: string): Promise<number[]> {
  const postmaster = Number((await readFile(join(dataDir, 'postgres', 'postmaster.pid'), 'utf8')).split('\n')[0]);
  const children = execFileSync('pgrep', ['-P', String(postmaster)], { encoding: 'utf8' }).trim().split('\n').filter(Boolean).map(Number);
  return [postmaster, ...children];
}

function signalAll(pids: readonly number[], signal: NodeJS.Signals): void {
  for (const pid of pids) {
    try {
      process.kill(pid, signal);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ESRCH') throw error; // gone already: nothing to pause or resume
    }
  }
}

/**
 * A job that prints a line a second; the database goes away after its first line (`outage.begin`)
 * and comes back 20 s later (`outage.end`), after the agent has sent the rest of its lines, its step
 * result and its job status. All of it must be stored, once.
 */
async function jobThroughOutage(coordinator: CoordinatorProcess, outage: { begin(): Promise<void>; end(): Promise<void> }): Promise<void> {
  const client = new CoordinatorClient(coordinator.url, ADMIN_TOKEN);
  const agent = await FakeAgent.connect(client.wsUrl, null, { labels: ['outage'], heartbeatMs: 1000 });
  try {
    const runId = await client.createRun(runStepsWorkflow('outage', 'outage', [{ name: 'build', steps: [['print', 'for i in $(seq 25); do echo $i; sleep 1; done']] }]));
    const dispatch = await agent.dispatch(0);
    agent.ack(dispatch);
    agent.status(dispatch, 'running');
    agent.step(dispatch, 0, 'print', 'running');
    agent.log(dispatch, 0, ['line 1']);
    await client.waitForJob(runId, 'build', (job) => job.status === 'running', 10_000, 'running');
    const began = Date.now();
    await outage.begin();
    for (let line = 2; line <= LINES; line++) {
      await new Promise((resolve) => setTimeout(resolve, 1000));
      agent.log(dispatch, 0, [`line ${line}`]);
      if (line === 4) assert.equal((await fetch(`${coordinator.url}/readyz`, { signal: AbortSignal.timeout(2_000) }).catch(() => null))?.ok ?? false, false, 'the database is really away');
    }
    agent.step(dispatch, 0, 'print', 'success');
    agent.status(dispatch, 'success', { durationMs: OUTAGE_MS });
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, OUTAGE_MS - (Date.now() - began))));
    await outage.end();

    const job = await client.waitForJob(runId, 'build', (j) => j.status === 'success', 60_000, 'the job to be stored green');
    assert.deepEqual(job.steps?.map((step) => [step.name, step.status]), [['print', 'success']]);
    assert.equal((await client.run(runId)).run.status, 'success');
    const stored = await eventually(async () => {
      const all = (await client.logs(runId)).flatMap((chunk) => chunk.lines);
      return all.length >= LINES ? all : undefined;
    }, 20_000, 'every line');
    assert.deepEqual(stored, Array.from({ length: LINES }, (_, i) => `line ${i + 1}`));
    assert.doesNotMatch(coordinator.output(), /could not be stored; dropped|gave up/);
  } finally {
    await agent.close();
  }
}

describe('the database away for 20 s under a running job (issue "Runs for months")', () => {
  it('paused (connections open, nothing answers: a hung database or a failover): every log line, the step result and the job status are stored once it answers', async (t) => {
    t.after(async () => {
      for (const cleanup of processCleanups.splice(0)) await cleanup();
    });
    const dataDir = await tempDir('sy-db-pause-');
    const coordinator = await startCoordinatorProcess({ SWITCHYARD_DATA_DIR: dataDir, SWITCHYARD_AGENT_AUTH: 'none', SWITCHYARD_SCALERS: '[]' });
    let pids: number[] = [];
    t.after(() => signalAll(pids, 'SIGCONT'));
    await jobThroughOutage(coordinator, {
      begin: async () => {
        pids = await postgresPids(dataDir);
        signalAll(pids, 'SIGSTOP');
      },
      end: () => Promise.resolve(signalAll(pids, 'SIGCONT')),
    });
  });

  it('stopped and started again (a restart: connections refused, then new ones): the same', async (t) => {
    t.after(async () => {
      for (const cleanup of processCleanups.splice(0)) await cleanup();
    });
    const pgDir = await tempDir('sy-db-restart-');
    let server = await startEmbeddedPostgres(pgDir, testLog);
    t.after(() => server.stop());
    await server.ensureDatabase('switchyard');
    const c = server.connection('switchyard');
    const databaseUrl = `postgres://${c.user}:${encodeURIComponent(c.password)}@${c.host}:${c.port}/switchyard`;
    const coordinator = await startCoordinatorProcess({ DATABASE_URL: databaseUrl, SWITCHYARD_AGENT_AUTH: 'none', SWITCHYARD_SCALERS: '[]' });
    await jobThroughOutage(coordinator, {
      begin: () => server.stop(),
      end: async () => {
        server = await startEmbeddedPostgres(pgDir, testLog, { port: server.port });
      },
    });
  });
});
