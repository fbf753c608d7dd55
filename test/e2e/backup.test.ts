import assert from 'node:assert/strict';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { runSwitchyard } from '../support/cli.ts';
import { tempDir } from '../support/database.ts';
import { CoordinatorClient, FakeAgent } from '../support/fake-agent.ts';
import { ADMIN_TOKEN, after as processCleanups, startCoordinatorProcess, stopProcess } from '../support/processes.ts';
import { call, secretJob } from './secrets/support.ts';

const SECRET = 'kept-through-the-backup';

/** A run of one job that reads the repository's secret, run to green by a fake agent; the dispatch's secrets. */
async function greenRunWithSecret(client: CoordinatorClient, coordinator: Awaited<ReturnType<typeof startCoordinatorProcess>>, agent: FakeAgent, index: number) {
  const created = await call(coordinator, 'POST', '/api/v1/runs', { repository: 'acme/app', workflow: { name: 'deploy', jobs: [secretJob('deploy', 'backup')] } });
  assert.equal(created.status, 201, JSON.stringify(created.body));
  const runId = String(created.body['runId']);
  const dispatch = await agent.dispatch(index);
  agent.ack(dispatch);
  agent.status(dispatch, 'running');
  agent.step(dispatch, 0, 'use-secret', 'running');
  agent.log(dispatch, 0, ['deploying']);
  agent.step(dispatch, 0, 'use-secret', 'success');
  agent.status(dispatch, 'success', { durationMs: 10 });
  await client.waitForRunStatus(runId, 'success');
  return { runId, secrets: dispatch.secrets };
}

describe('back up, wipe, restore on the embedded default (docs/backups.md)', () => {
  it('the runs, their logs, the secrets (opened with the restored key) and the run numbers are back', async (t) => {
    t.after(async () => {
      for (const cleanup of processCleanups.splice(0)) await cleanup();
    });
    const dataDir = await tempDir('sy-backup-e2e-');
    const env = { SWITCHYARD_DATA_DIR: dataDir, SWITCHYARD_AGENT_AUTH: 'none', SWITCHYARD_SCALERS: '[]' };
    const coordinator = await startCoordinatorProcess(env);
    const client = new CoordinatorClient(coordinator.url, ADMIN_TOKEN);
    assert.equal((await call(coordinator, 'PUT', '/api/v1/secrets/repo:acme/app/API_KEY', { value: SECRET })).status, 201);
    const agent = await FakeAgent.connect(client.wsUrl, null, { labels: ['backup'], heartbeatMs: 1000 });
    const first = await greenRunWithSecret(client, coordinator, agent, 0);
    assert.equal(first.secrets?.['API_KEY'], SECRET);

    const file = join(await tempDir('sy-backup-file-'), 'switchyard.backup');
    const cliEnv = { SWITCHYARD_URL: coordinator.url, SWITCHYARD_ADMIN_TOKEN: ADMIN_TOKEN };
    const backup = await runSwitchyard(['backup', '--out', file, '--with-master-key'], cliEnv);
    assert.equal(backup.code, 0, backup.stderr);
    assert.match(backup.stdout, /^1 runs, \d+ rows in \d+ tables, 1 files \(\d+ bytes\) written to .*switchyard\.backup\n$/, 'the master key is its one file here');
    const whileRunning = await runSwitchyard(['restore', file], { SWITCHYARD_DATA_DIR: dataDir });
    assert.equal(whileRunning.code, 1);
    assert.match(whileRunning.stderr, /^switchyard restore: the data dir .* is in use by a running coordinator \(pid \d+\): stop it first\n$/);

    await agent.close();
    await stopProcess(coordinator);
    await rm(dataDir, { recursive: true, force: true }); // the disk is lost
    const restore = await runSwitchyard(['restore', file], { SWITCHYARD_DATA_DIR: dataDir });
    assert.equal(restore.code, 0, restore.stderr);
    assert.match(restore.stdout, /^restored 1 runs, \d+ rows in \d+ tables, 1 files \(\d+ bytes\) from .* \(taken \d{4}-.*\)\n$/);

    const again = await startCoordinatorProcess(env);
    t.after(() => stopProcess(again));
    const reopened = new CoordinatorClient(again.url, ADMIN_TOKEN);
    const view = await reopened.run(first.runId);
    assert.deepEqual([view.run.status, view.run.number, view.jobs[0]?.status], ['success', 1, 'success']);
    assert.deepEqual((await reopened.logs(first.runId)).flatMap((chunk) => chunk.lines), ['deploying']);
    const agentAgain = await FakeAgent.connect(reopened.wsUrl, null, { labels: ['backup'], heartbeatMs: 1000 });
    t.after(() => agentAgain.close());
    const second = await greenRunWithSecret(reopened, again, agentAgain, 0);
    assert.equal(second.secrets?.['API_KEY'], SECRET, 'the secret stored before the backup opens with the restored master key');
    assert.equal((await reopened.run(second.runId)).run.number, 2, 'run numbers go on');
  });
});
