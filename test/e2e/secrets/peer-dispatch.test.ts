import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { skipReason } from '../../support/database.ts';
import { CoordinatorClient, FakeAgent, dropDatabase } from '../../support/fake-agent.ts';
import { ADMIN_TOKEN, after as processCleanups, sharedDatabaseUrl, startCoordinatorProcess, stopProcess } from '../../support/processes.ts';
import type { CoordinatorProcess } from '../../support/processes.ts';
import { call, dumpAllTables, secretJob } from './support.ts';

describe('secrets of a dispatch that crosses to a peer coordinator’s agent (real processes)', { skip: await skipReason('external') }, () => {
  let databaseUrl: string;
  let a: CoordinatorProcess;
  let b: CoordinatorProcess;
  const key = randomBytes(32).toString('base64');
  const planted = `PLANTED-peer-${randomBytes(12).toString('hex')}`;

  before(async () => {
    databaseUrl = await sharedDatabaseUrl('external');
    const env = { DATABASE_URL: databaseUrl, SWITCHYARD_SECRET_KEY: key, SWITCHYARD_SCALERS: 'none', LOG_LEVEL: 'trace' };
    a = await startCoordinatorProcess({ ...env, SWITCHYARD_COORDINATOR_ID: 'coord-a' });
    b = await startCoordinatorProcess({ ...env, SWITCHYARD_COORDINATOR_ID: 'coord-b' });
  });
  after(async () => {
    await stopProcess(a);
    await stopProcess(b);
    await dropDatabase(databaseUrl);
    for (const fn of processCleanups.splice(0)) await fn();
  });

  it('A resolves, the frame crosses the database sealed, B sends the values and masks what the agent echoes', async () => {
    assert.equal((await call(a, 'PUT', '/api/v1/secrets/global/PEER_SECRET', { value: planted })).status, 201);
    const clientA = new CoordinatorClient(a.url, ADMIN_TOKEN);
    const clientB = new CoordinatorClient(b.url, ADMIN_TOKEN);
    const label = `peer-${randomUUID().slice(0, 8)}`;
    const agent = await FakeAgent.connect(clientB.wsUrl, (await clientA.createToken()).token, { labels: [label] });
    try {
      const created = await call(a, 'POST', '/api/v1/runs', { repository: 'acme/app', workflow: { name: 'peer', jobs: [secretJob('build', label)] } });
      const runId = String(created.body['runId']);
      const dispatch = await agent.dispatch(0, 20_000);
      assert.equal(dispatch.secrets?.['PEER_SECRET'], planted);
      assert.equal('sealedSecrets' in dispatch, false, 'the agent gets the plain fields');
      agent.ack(dispatch);
      agent.log(dispatch, 0, [`echo ${planted}`]);
      agent.status(dispatch, 'failed', { error: `failed with ${planted}` });
      const view = await clientA.waitForRunStatus(runId, 'failed', 20_000);
      assert.equal(view.jobs[0]?.outcome, 'failed with ***');
      assert.deepEqual((await clientA.logs(runId)).flatMap((c) => c.lines), ['echo ***']);
      for (const [table, rows] of await dumpAllTables(databaseUrl)) assert.ok(!rows.includes(planted), `found in table ${table}`);
      assert.ok(!a.output().includes(planted) && !b.output().includes(planted), 'found in a coordinator log');
    } finally {
      await agent.close();
    }
  });
});
