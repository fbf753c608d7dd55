import assert from 'node:assert/strict';
import { after as afterAll, describe, it } from 'node:test';
import pg from 'pg';
import { findFreePort } from '../../src/db/free-port.ts';
import { skipReason, tempDir } from '../support/database.ts';
import { ADMIN_TOKEN, after, sharedDatabaseUrl, startCoordinatorProcess, stopProcess } from '../support/processes.ts';
import type { CoordinatorProcess } from '../support/processes.ts';
import { eventually } from '../support/runtime.ts';

/**
 * The default set-up restarted under a running job (issue: a restart must lose nothing): the
 * coordinator keeps its id, its bare-metal scaler spawns the reference agent for the job.
 */
const BARE_METAL = JSON.stringify([{ type: 'bare-metal', name: 'bare-metal', maxAgents: 2 }]);

afterAll(async () => {
  for (const cleanup of after.splice(0)) await cleanup();
});

const workflow = {
  name: 'slow',
  jobs: [{ _type: 'static', name: 'build', runsOn: [{ kind: 'exact', value: 'kici:os:linux' }], needs: [], steps: [{ name: 'work', hasOutputs: false, run: 'echo started; sleep 4; echo done' }] }],
};

describe('restarting the coordinator under a running job (real processes, bare-metal scaler)', { skip: await skipReason('external') }, () => {
  async function setUp(env: Record<string, string> = {}) {
    const databaseUrl = await sharedDatabaseUrl('external');
    const db = new pg.Client({ connectionString: databaseUrl });
    await db.connect();
    // The restarted coordinator listens where the agent it spawned dials back.
    const settings = { PORT: String(await findFreePort()), DATABASE_URL: databaseUrl, SWITCHYARD_COORDINATOR_ID: 'restarted', SWITCHYARD_SCALERS: BARE_METAL, SWITCHYARD_DATA_DIR: await tempDir('sy-restart-'), SWITCHYARD_SCALER_TICK_MS: '200', ...env };
    const coordinator = await startCoordinatorProcess(settings);
    const created = await coordinator.api('/api/v1/runs', { method: 'POST', body: JSON.stringify({ workflow }) });
    assert.equal(created.status, 201, await created.clone().text());
    const runId = ((await created.json()) as { runId: string }).runId;
    const logs = async (c: CoordinatorProcess) => (await c.api(`/api/v1/runs/${runId}/logs`, { headers: { accept: 'text/plain', authorization: `Bearer ${ADMIN_TOKEN}` } })).text();
    await eventually(async () => (await logs(coordinator)).includes('started'), 60_000, 'the step to start on a spawned agent');
    const status = async () => (await db.query<{ status: string }>('select status from runs where run_id = $1', [runId])).rows[0]?.status;
    const job = async () => (await db.query<{ status: string; outcome: string | null; attempt: number }>('select status, outcome, attempt from jobs where run_id = $1', [runId])).rows[0];
    return { db, settings, coordinator, status, job, logs };
  }

  it('Ctrl-C drains: the coordinator waits for the running job, which succeeds, then stops', async () => {
    const { db, coordinator, status, job } = await setUp();
    try {
      coordinator.child.kill('SIGINT');
      assert.equal(await coordinator.exited, 0);
      assert.equal(await status(), 'success', JSON.stringify(await job()));
      assert.match(coordinator.output(), /draining: waiting for running jobs to finish/);
    } finally {
      await stopProcess(coordinator);
      await db.end();
    }
  });

  it('a stop that cannot wait leaves the agent running; after the restart it reclaims the job, which succeeds', async () => {
    const { db, settings, coordinator, status, job } = await setUp({ SWITCHYARD_SHUTDOWN_DRAIN_MS: '0' });
    let restarted: CoordinatorProcess | undefined;
    try {
      coordinator.child.kill('SIGTERM');
      await coordinator.exited;
      assert.match(coordinator.output(), /left running for the restart/);
      restarted = await startCoordinatorProcess(settings);
      await eventually(async () => (await status()) === 'success', 60_000, 'the run to succeed after the restart').catch(async (error: unknown) => {
        throw new Error(`${String(error)}: ${JSON.stringify(await job())}\n${restarted?.output().slice(-3000) ?? ''}`);
      });
      assert.equal((await job())?.attempt, 1, 'the same attempt finished; nothing was re-run');
    } finally {
      if (restarted) await stopProcess(restarted);
      await stopProcess(coordinator);
      await db.end();
    }
  });

  it('kill -9: the surviving agent gets its recovery window at restore, reclaims the job, and it succeeds', async () => {
    const { db, settings, coordinator, status, job } = await setUp();
    let restarted: CoordinatorProcess | undefined;
    try {
      coordinator.child.kill('SIGKILL');
      await coordinator.exited;
      restarted = await startCoordinatorProcess(settings);
      await eventually(async () => (await status()) === 'success', 60_000, 'the run to succeed after the restart').catch(async (error: unknown) => {
        throw new Error(`${String(error)}: ${JSON.stringify(await job())}\n${restarted?.output().slice(-3000) ?? ''}`);
      });
      assert.equal((await job())?.attempt, 1);
      assert.doesNotMatch(restarted.output(), /unknown in-flight job/);
    } finally {
      if (restarted) await stopProcess(restarted);
      await db.end();
    }
  });
});
