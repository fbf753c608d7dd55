import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { readFile, readdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import pg from 'pg';
import { runReplayCommand } from '../../../src/cli/replay.ts';
import { runVisualizeCommand } from '../../../src/cli/visualize.ts';
import { connectDatabase } from '../../../src/db/database.ts';
import type { Database } from '../../../src/db/database.ts';
import { migrateToLatest } from '../../../src/db/migrate.ts';
import { externalAdminConfig, externalUrl, skipReason, tempDir, testLog } from '../../support/database.ts';
import { startTestRuntime, waitingWorkflow } from '../../support/runtime.ts';
import { RunDriver } from './drive.ts';
import { ADMIN_TOKEN, after as processCleanups, startCoordinatorProcess, stopProcess } from '../../support/processes.ts';

function io() {
  const out = { stdout: '', stderr: '' };
  return {
    out,
    io: { stdout: { write: (text: string) => ((out.stdout += text), true) }, stderr: { write: (text: string) => ((out.stderr += text), true) } },
  };
}

async function admin(statement: string): Promise<void> {
  const client = new pg.Client(externalAdminConfig());
  await client.connect();
  await client.query(statement);
  await client.end();
}

describe('switchyard replay and visualize against the database (external Postgres)', { skip: await skipReason('external') }, () => {
  const name = `sy_cli_${process.pid}_${randomBytes(4).toString('hex')}`;
  const env = { DATABASE_URL: externalUrl(name), LOG_LEVEL: 'warn' };
  let database: Database;
  let runId = '';

  before(async () => {
    await admin(`CREATE DATABASE "${name}"`);
    database = connectDatabase({ connectionString: env.DATABASE_URL }, 'external', testLog);
    await migrateToLatest(database.db);
    const runtime = await startTestRuntime(database.db, 'coord-a');
    const run = new RunDriver(database.db, runtime);
    await run.create(waitingWorkflow('wf', { jobs: ['build', 'test'] }));
    await run.until('build', { waiting: 'agent' });
    await run.send({ type: 'run.cancel', reason: 'cli test', force: false, by: 'test' });
    await run.finalStatus();
    await runtime.stop();
    runId = run.runId;
  });

  after(async () => {
    await database.close();
    await admin(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
  });

  it('prints every step and exits 0 when the replay is exact; --json and --to with --export', async () => {
    const text = io();
    assert.equal(await runReplayCommand([runId], env, text.io), 0, text.out.stderr);
    assert.match(text.out.stdout, /^seq 0 {2}\S+ {2}run\.created {2}workflowName=wf/m);
    assert.match(text.out.stdout, /run {6}active\.pending → cancelled/);
    assert.match(text.out.stdout, /state at seq \d+ equals the stored snapshot/);
    assert.match(text.out.stdout, /result: exact/);
    const json = io();
    assert.equal(await runReplayCommand([runId, '--json'], env, json.io), 0);
    const report = JSON.parse(json.out.stdout) as { exact: boolean; steps: { seq: number }[] };
    assert.equal(report.exact, true);
    const file = join(await tempDir(), 'state.json');
    const partial = io();
    assert.equal(await runReplayCommand([runId, '--to', '0', '--export', file], env, partial.io), 0);
    const snapshot = JSON.parse(await readFile(file, 'utf8')) as { value: unknown; children: Record<string, unknown> };
    assert.deepEqual(snapshot.value, { active: 'pending' });
    assert.deepEqual(Object.keys(snapshot.children).sort(), ['build', 'test']);
  });

  it('writes an offline copy of the visualizer for the run', async () => {
    const dir = await tempDir();
    const text = io();
    assert.equal(await runVisualizeCommand(['--out', dir, '--run', runId], env, text.io), 0, text.out.stderr);
    assert.deepEqual((await readdir(dir)).sort(), ['app.js', 'chart.js', 'common.js', 'data.js', 'elk.bundled.js', 'index.html', 'source.js', 'style.css', 'view.js']);
    const data = await readFile(join(dir, 'data.js'), 'utf8');
    const embedded = JSON.parse(data.replace(/^window\.SWITCHYARD_OFFLINE = /, '').replace(/;\n$/, '')) as Record<string, unknown>;
    assert.equal(embedded['runId'], runId);
    assert.equal((embedded['replay'] as { exact: boolean }).exact, true);
    assert.equal((embedded['history'] as unknown[]).length, (embedded['replay'] as { steps: unknown[] }).steps.length);
    assert.equal((embedded['machines'] as unknown[]).length, 5, 'run, job, concurrency, scaler, scalerAgent');
    assert.equal(text.out.stdout.trim(), join(dir, 'index.html'));
  });

  it('exits 1 and names the seq when the journal diverges; 3 for another chart version unless --force', async () => {
    await database.db.updateTable('run_events').set({ state_after: JSON.stringify({ run: 'running', jobs: {} }) }).where('run_id', '=', runId).where('seq', '=', 1).execute();
    const text = io();
    assert.equal(await runReplayCommand([runId], env, text.io), 1);
    assert.match(text.out.stdout, /DIVERGED first at seq 1 \(placement\.none\)/);
    await database.db.updateTable('run_snapshots').set({ machine_version: 999 }).where('run_id', '=', runId).execute();
    const refused = io();
    assert.equal(await runReplayCommand([runId], env, refused.io), 3);
    assert.match(refused.out.stderr, /version 999.*--force/);
    assert.equal(await runReplayCommand([runId, '--force'], env, io().io), 1);
  });

  it('exits 3 for an unknown run, 2 for bad usage', async () => {
    const unknown = io();
    assert.equal(await runReplayCommand(['no-such-run'], env, unknown.io), 3);
    assert.match(unknown.out.stderr, /run no-such-run has no journal/);
    assert.equal(await runReplayCommand([], env, io().io), 2);
    assert.equal(await runReplayCommand([runId, '--to', 'x'], env, io().io), 2);
    assert.equal(await runVisualizeCommand(['--run', runId], env, io().io), 2);
  });
});

describe('switchyard replay with the embedded database held by a coordinator', () => {
  it('asks that coordinator, found as the other commands find it, with the admin token of its data dir', async (t) => {
    const dataDir = await tempDir();
    const coordinator = await startCoordinatorProcess({ SWITCHYARD_DATA_DIR: dataDir, SWITCHYARD_SCALERS: '[]' });
    t.after(async () => {
      await stopProcess(coordinator);
      for (const cleanup of processCleanups.splice(0)) await cleanup();
    });
    const env = { SWITCHYARD_DATA_DIR: dataDir, PORT: new URL(coordinator.url).port, SWITCHYARD_ADMIN_TOKEN: ADMIN_TOKEN };
    const text = io();
    assert.equal(await runReplayCommand(['no-such-run'], env, text.io), 3);
    assert.doesNotMatch(text.out.stderr, /held by a running coordinator/);
    assert.match(text.out.stderr, /no-such-run/, 'the coordinator answered about the run');
    const noToken = io();
    const withoutToken = { SWITCHYARD_DATA_DIR: await tempDir(), PORT: env.PORT };
    await writeFile(join(withoutToken.SWITCHYARD_DATA_DIR, 'switchyard.lock'), JSON.stringify({ pid: process.pid, at: new Date().toISOString() }));
    assert.equal(await runReplayCommand(['some-run'], withoutToken, noToken.io), 3);
    assert.match(noToken.out.stderr, /held by a running coordinator \(pid \d+\), and no admin token: set SWITCHYARD_ADMIN_TOKEN/);
  });
});
