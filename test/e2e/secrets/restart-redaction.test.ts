import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { after, describe, it } from 'node:test';
import { findFreePort } from '../../../src/db/free-port.ts';
import { skipReason } from '../../support/database.ts';
import { CoordinatorClient, FakeAgent, dropDatabase } from '../../support/fake-agent.ts';
import { ADMIN_TOKEN, after as processCleanups, sharedDatabaseUrl, startCoordinatorProcess, stopProcess } from '../../support/processes.ts';
import type { CoordinatorProcess } from '../../support/processes.ts';
import { call, dumpAllTables, secretJob } from './support.ts';

describe('masking survives a coordinator restart under a running job (real processes)', { skip: await skipReason('external') }, () => {
  const cleanups: (() => Promise<void>)[] = [];
  after(async () => {
    for (const fn of cleanups.reverse()) await fn();
    for (const fn of processCleanups.splice(0)) await fn();
  });

  it('the restarted coordinator has not sent the values, yet masks what the reclaiming agent echoes', async () => {
    const databaseUrl = await sharedDatabaseUrl('external');
    cleanups.push(() => dropDatabase(databaseUrl));
    const planted = `PLANTED-restart-${randomBytes(12).toString('hex')}`;
    const settings = {
      ...{ PORT: String(await findFreePort()), DATABASE_URL: databaseUrl, SWITCHYARD_COORDINATOR_ID: 'sec-restart' },
      ...{ SWITCHYARD_SECRET_KEY: randomBytes(32).toString('hex'), SWITCHYARD_SHUTDOWN_DRAIN_MS: '0', SWITCHYARD_SCALERS: 'none', LOG_LEVEL: 'trace' },
    };
    const first: CoordinatorProcess = await startCoordinatorProcess(settings);
    cleanups.push(() => stopProcess(first));
    const client = new CoordinatorClient(first.url, ADMIN_TOKEN);
    const token = (await client.createToken()).token;
    assert.equal((await call(first, 'PUT', '/api/v1/secrets/global/DEPLOY_KEY', { value: planted })).status, 201);
    const label = `restart-${randomUUID().slice(0, 8)}`;
    const agent = await FakeAgent.connect(client.wsUrl, token, { labels: [label], agentId: `agent-${label}` });
    const runId = String((await call(first, 'POST', '/api/v1/runs', { repository: 'acme/app', workflow: { name: 'r', jobs: [secretJob('build', label)] } })).body['runId']);
    const dispatch = await agent.dispatch(0);
    assert.equal(dispatch.secrets?.['DEPLOY_KEY'], planted);
    agent.ack(dispatch);
    agent.status(dispatch, 'running');
    agent.log(dispatch, 0, [`before ${planted}`]);
    await client.waitForJob(runId, 'build', (j) => j.status === 'running');
    first.child.kill('SIGTERM');
    await first.exited;
    await agent.closed;

    const second = await startCoordinatorProcess(settings);
    cleanups.push(() => stopProcess(second));
    const again = await FakeAgent.connect(client.wsUrl, token, { labels: [label], agentId: agent.agentId, inFlightJobs: [{ jobId: dispatch.jobId, runId }] });
    cleanups.push(() => again.close());
    await new Promise((resolve) => setTimeout(resolve, 500));
    again.log(dispatch, 0, [`after ${planted}`]);
    again.status(dispatch, 'success', { durationMs: 5 });
    await client.waitForRunStatus(runId, 'success', 20_000);
    assert.deepEqual((await client.logs(runId)).flatMap((c) => c.lines), ['before ***', 'after ***']);
    for (const [table, rows] of await dumpAllTables(databaseUrl)) assert.ok(!rows.includes(planted), `found in table ${table}`);
    assert.ok(!first.output().includes(planted) && !second.output().includes(planted), 'found in a coordinator log');
  });
});
