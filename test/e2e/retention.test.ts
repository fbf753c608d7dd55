import assert from 'node:assert/strict';
import { rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import pg from 'pg';
import { runSwitchyard } from '../support/cli.ts';
import { skipReason, tempDir } from '../support/database.ts';
import { CoordinatorClient, dropDatabase, FakeAgent, runStepsWorkflow } from '../support/fake-agent.ts';
import { ADMIN_TOKEN, after as processCleanups, sharedDatabaseUrl, startCoordinatorProcess } from '../support/processes.ts';

/** A run of one job printing `lines`, run to green by the fake agent. */
async function greenRun(client: CoordinatorClient, agent: FakeAgent, index: number, lines: string[]): Promise<string> {
  const runId = await client.createRun(runStepsWorkflow(`kept-${index}`, 'retention', [{ name: 'build', steps: [['print', 'echo']] }]));
  const dispatch = await agent.dispatch(index);
  agent.ack(dispatch);
  agent.status(dispatch, 'running');
  agent.step(dispatch, 0, 'print', 'running');
  agent.log(dispatch, 0, lines);
  agent.step(dispatch, 0, 'print', 'success');
  agent.status(dispatch, 'success', { durationMs: 5 });
  await client.waitForRunStatus(runId, 'success');
  return runId;
}

async function rowsOf(databaseUrl: string, runIds: string[]): Promise<number> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    const { rows } = await client.query<{ n: number }>(
      `SELECT (SELECT count(*) FROM run_events WHERE run_id = ANY($1)) + (SELECT count(*) FROM run_snapshots WHERE run_id = ANY($1)) + (SELECT count(*) FROM job_logs WHERE run_id = ANY($1)) AS n`,
      [runIds],
    );
    return Number(rows[0]?.n);
  } finally {
    await client.end();
  }
}

describe('retention on a running coordinator (docs/retention.md)', { skip: await skipReason('external') }, () => {
  it('switchyard retention archives ended runs, whose run, events, logs, replay and rerun still work; a corrupt archive fails that run only', async (t) => {
    t.after(async () => {
      for (const cleanup of processCleanups.splice(0)) await cleanup();
    });
    const dataDir = await tempDir('sy-retention-');
    const databaseUrl = await sharedDatabaseUrl('external');
    t.after(() => dropDatabase(databaseUrl));
    const coordinator = await startCoordinatorProcess({ DATABASE_URL: databaseUrl, SWITCHYARD_BLOB_STORE: 'files', SWITCHYARD_DATA_DIR: dataDir, SWITCHYARD_AGENT_AUTH: 'none', SWITCHYARD_SCALERS: '[]' });
    const client = new CoordinatorClient(coordinator.url, ADMIN_TOKEN);
    const agent = await FakeAgent.connect(client.wsUrl, null, { labels: ['retention'], heartbeatMs: 1000 });
    t.after(() => agent.close());
    const ended = [await greenRun(client, agent, 0, ['one', 'two']), await greenRun(client, agent, 1, ['three'])];
    const waiting = await client.createRun(runStepsWorkflow('waits', 'nobody-has-this', [{ name: 'build', steps: [['x', 'true']] }]));
    const before = await Promise.all(ended.map(async (runId) => ({ events: (await client.journal(runId)).length, logs: await client.logs(runId) })));
    const env = { SWITCHYARD_URL: coordinator.url, SWITCHYARD_ADMIN_TOKEN: ADMIN_TOKEN };

    const dry = await runSwitchyard(['retention', '--older-than', '0s', '--dry-run'], env);
    assert.equal(dry.code, 0, dry.stderr);
    assert.match(dry.stdout, /^would archive 2 runs: \d+ journal events, 2 snapshots, 2 log chunks/m);
    const pass = await runSwitchyard(['retention', '--older-than', '0s'], env);
    assert.equal(pass.code, 0, pass.stderr);
    assert.match(pass.stdout, /^archived 2 runs into [\d.]+ MiB of archives: \d+ journal events, 2 snapshots, 2 log chunks \([\d.]+ MiB of database rows\)$/m);
    assert.equal(await rowsOf(databaseUrl, ended), 0, 'their journal, snapshot and log rows left the database');
    assert.ok((await rowsOf(databaseUrl, [waiting])) > 0);
    assert.equal((await runSwitchyard(['retention', '--older-than', '0s'], env)).stdout.split('\n')[0], 'archived 0 runs into 0.00 MiB of archives: 0 journal events, 0 snapshots, 0 log chunks (0.00 MiB of database rows)', 'a second pass finds nothing');

    for (const [i, runId] of ended.entries()) {
      const view = await coordinator.api(`/api/v1/runs/${runId}`).then((r) => r.json() as Promise<{ run: { status: string; archived: boolean } }>);
      assert.deepEqual([view.run.status, view.run.archived], ['success', true]);
      assert.equal((await client.journal(runId)).length, before[i]?.events, 'the journal, read from the archive');
      assert.deepEqual(await client.logs(runId), before[i]?.logs, 'the logs, read from the archive');
      const replay = await runSwitchyard(['replay', runId], env);
      assert.equal(replay.code, 0, replay.stderr);
    }
    const waitingView = await coordinator.api(`/api/v1/runs/${waiting}`).then((r) => r.json() as Promise<{ run: { archived: boolean } }>);
    assert.equal(waitingView.run.archived, false, 'a run that has not ended is not archived');
    const rerun = await coordinator.api(`/api/v1/runs/${ended[0]}/rerun`, { method: 'POST', body: '{}' });
    assert.equal(rerun.status, 201, 'an archived run can be rerun: its frozen input is in its archive');

    const [corrupt, missing] = ended as [string, string];
    await writeFile(join(dataDir, 'blobs', 'objects', 'archives', 'runs', `${corrupt}.json.gz`), 'not gzip');
    await rm(join(dataDir, 'blobs', 'objects', 'archives', 'runs', `${missing}.json.gz`));
    for (const [runId, reason] of [[corrupt, /it is corrupt/], [missing, /no archive at archives\/runs\//]] as const) {
      const events = await coordinator.api(`/api/v1/runs/${runId}/events`);
      const body = (await events.json()) as { error: string; reason: string };
      assert.equal(events.status, 500);
      assert.equal(body.error, 'archive unreadable');
      assert.match(body.reason, new RegExp(`^the archive of run ${runId} cannot be read: ${reason.source}`));
      assert.equal((await coordinator.api(`/api/v1/runs/${runId}`)).status, 200, 'the run itself still shows');
    }
    assert.equal((await coordinator.api(`/api/v1/runs/${waiting}/events`)).status, 200, 'other runs are not affected');
    assert.match(await client.metrics(), /^switchyard_retention_runs_archived_total 2$/m);
  });
});
