import assert from 'node:assert/strict';
import { after as afterAll, describe, it } from 'node:test';
import { pino } from 'pino';
import { loadConfig } from '../../../src/config/index.ts';
import { createAgentToken } from '../../../src/db/agent-tokens.ts';
import { openDatabase } from '../../../src/db/database.ts';
import { startCoordinator } from '../../../src/main.ts';
import { sweepExpiredTokens } from '../../../src/ws/token-expiry.ts';
import { skipReason, tempDir } from '../../support/database.ts';
import { FakeAgent } from '../../support/fake-agent.ts';
import { after, sharedDatabaseUrl } from '../../support/processes.ts';
import { eventually } from '../../support/runtime.ts';

const silent = pino({ level: process.env.TEST_LOG_LEVEL ?? 'silent' });
const HOUR = 3_600_000;

afterAll(async () => {
  for (const cleanup of after.splice(0)) await cleanup();
});

describe('ephemeral token expiry (protocol.md §3.2)', { skip: await skipReason('external') }, () => {
  it('B14: expiry never kicks a session holding a running job; it is closed 4010 once idle, and an idle one at once', async () => {
    const databaseUrl = await sharedDatabaseUrl('external');
    const config = loadConfig({ DATABASE_URL: databaseUrl, PORT: '0', SWITCHYARD_ADMIN_TOKEN: 'expiry-admin', SWITCHYARD_DATA_DIR: await tempDir('sy-expiry-'), LOG_LEVEL: 'silent' });
    const coordinator = await startCoordinator(config, silent);
    const database = await openDatabase(config, silent);
    const { db } = database;
    try {
      const wsUrl = `${coordinator.url.replace('http', 'ws')}/ws/agent`;
      const mint = async (agentId: string, labels: string[]) =>
        (await createAgentToken(db, { agentType: 'ephemeral', createdBy: agentId, labels, expiresAt: Date.now() + HOUR, now: Date.now() })).token;
      const busy = await FakeAgent.connect(wsUrl, await mint('scaler-bare-metal-0000beef', ['expiry']), { agentId: 'scaler-bare-metal-0000beef', labels: ['expiry'] });
      const idle = await FakeAgent.connect(wsUrl, await mint('scaler-bare-metal-0000cafe', ['elsewhere']), { agentId: 'scaler-bare-metal-0000cafe', labels: ['elsewhere'] });
      const workflow = { name: 'long', jobs: [{ _type: 'static', name: 'build', runsOn: [{ kind: 'exact', value: 'expiry' }], needs: [], steps: [{ name: 's', hasOutputs: false, run: 'sleep 1' }] }] };
      const created = await fetch(`${coordinator.url}/api/v1/runs`, { method: 'POST', headers: { authorization: 'Bearer expiry-admin', 'content-type': 'application/json' }, body: JSON.stringify({ workflow, repository: 'acme/app' }) });
      assert.equal(created.status, 201);
      const dispatch = await busy.dispatch();
      busy.ack(dispatch);
      busy.status(dispatch, 'running');
      await eventually(() => coordinator.runtime.registry.get(busy.agentId)?.slots.size === 1, 5_000, 'the running job to hold a slot');
      const later = () => Date.now() + 2 * HOUR;
      const first = await sweepExpiredTokens({ db, registry: coordinator.runtime.registry, now: later, log: silent });
      assert.deepEqual(first.closed, ['scaler-bare-metal-0000cafe'], 'only the idle session is closed');
      assert.equal(first.deleted, 2, 'both expired rows are deleted');
      assert.deepEqual(await idle.closed, { code: 4010, reason: 'Token expired' });
      assert.ok(busy.isOpen, 'the session running a job stays');
      busy.status(dispatch, 'success');
      await eventually(() => coordinator.runtime.registry.get(busy.agentId)?.slots.size === 0, 5_000, 'the slot to be freed');
      const second = await sweepExpiredTokens({ db, registry: coordinator.runtime.registry, now: later, log: silent });
      assert.deepEqual(second.closed, ['scaler-bare-metal-0000beef'], 'closed once it holds no job');
      assert.deepEqual(await busy.closed, { code: 4010, reason: 'Token expired' });
      const { rows } = await db.selectFrom('jobs').select('status').execute().then((r) => ({ rows: r }));
      assert.deepEqual(rows.map((r) => r.status), ['success'], 'the job was not failed by the expiry');
    } finally {
      await coordinator.close();
      await database.close();
    }
  });
});
