import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { findFreePort } from '../../../src/db/free-port.ts';
import { tempDir } from '../../support/database.ts';
import { CoordinatorClient, FakeAgent } from '../../support/fake-agent.ts';
import { ADMIN_TOKEN, after as processCleanups, startCoordinatorProcess, stopProcess } from '../../support/processes.ts';
import { call, secretJob } from './support.ts';

describe('the embedded mode generates its master key into the data dir and reuses it (real process, embedded Postgres)', () => {
  const cleanups: (() => Promise<void>)[] = [];
  after(async () => {
    for (const fn of cleanups.reverse()) await fn();
    for (const fn of processCleanups.splice(0)) await fn();
  });

  it('secret-key appears with mode 0600; after a restart the same key opens what was stored before', async () => {
    const dataDir = await tempDir('sy-embedded-key-');
    const settings = { SWITCHYARD_DATA_DIR: dataDir, PORT: String(await findFreePort()), SWITCHYARD_SCALERS: 'none' };
    const first = await startCoordinatorProcess(settings);
    cleanups.push(() => stopProcess(first));
    assert.equal((await call(first, 'PUT', '/api/v1/secrets/global/EMBEDDED_SECRET', { value: 'stored-before-restart' })).status, 201);
    const keyFile = join(dataDir, 'secret-key');
    assert.equal((await stat(keyFile)).mode & 0o777, 0o600);
    const key = await readFile(keyFile, 'utf8');
    assert.match(key.trim(), /^[0-9a-f]{64}$/);
    assert.ok(!first.output().includes(key.trim()), 'the key is never logged');
    await stopProcess(first);

    const second = await startCoordinatorProcess(settings);
    cleanups.push(() => stopProcess(second));
    assert.equal(await readFile(keyFile, 'utf8'), key, 'the file is reused, not replaced');
    const client = new CoordinatorClient(second.url, ADMIN_TOKEN);
    const label = `emb-${randomUUID().slice(0, 8)}`;
    const agent = await FakeAgent.connect(client.wsUrl, (await client.createToken()).token, { labels: [label] });
    cleanups.push(() => agent.close());
    await call(second, 'POST', '/api/v1/runs', { workflow: { name: 'e', jobs: [secretJob('build', label)] } });
    const dispatch = await agent.dispatch(0, 20_000);
    assert.equal(dispatch.secrets?.['EMBEDDED_SECRET'], 'stored-before-restart');
  });
});
