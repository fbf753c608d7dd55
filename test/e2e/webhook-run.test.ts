import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { after as afterAll, before, describe, it } from 'node:test';
import { sign } from '@octokit/webhooks-methods';
import pg from 'pg';
import { skipReason } from '../support/database.ts';
import { createLockRepo, lockFileWith, pushWorkflow, runJob } from '../support/lock-repo.ts';
import { after, sharedDatabaseUrl, startCoordinatorProcess, stopProcess } from '../support/processes.ts';
import type { CoordinatorProcess } from '../support/processes.ts';
import { eventually } from '../support/runtime.ts';
import { githubHeaders, pushPayload } from '../support/webhooks.ts';

const SECRET = 'webhook-secret-for-tests';
async function postWebhook(coordinator: CoordinatorProcess, payload: unknown, deliveryId: string, signature?: string) {
  const body = JSON.stringify(payload);
  return fetch(`${coordinator.url}/webhooks/github`, { method: 'POST', body, headers: await githubHeaders(SECRET, body, deliveryId, 'push', signature) });
}

async function deliveryStatus(db: pg.Client, deliveryId: string): Promise<string | undefined> {
  const { rows } = await db.query<{ status: string }>('select status from deliveries where delivery_id = $1', [deliveryId]);
  return rows[0]?.status;
}

describe('webhook → lock file → run → agent (real processes)', { skip: await skipReason('external') }, () => {
  let coordinator: CoordinatorProcess;
  let agent: ChildProcess;
  let db: pg.Client;
  let databaseUrl: string;
  let repo: Awaited<ReturnType<typeof createLockRepo>>;

  before(async () => {
    databaseUrl = await sharedDatabaseUrl('external');
    db = new pg.Client({ connectionString: databaseUrl });
    await db.connect();
    repo = await createLockRepo();
    coordinator = await startCoordinatorProcess({ DATABASE_URL: databaseUrl, GITHUB_WEBHOOK_SECRET: SECRET, SWITCHYARD_COORDINATOR_ID: 'coord-w' });
    const registered = await coordinator.api('/api/v1/repositories', { method: 'POST', body: JSON.stringify({ name: 'acme/app', provider: 'local', path: repo.path }) });
    assert.equal(registered.status, 201);
    const token = (await (await coordinator.api('/api/v1/agent-tokens', { method: 'POST', body: '{}' })).json()) as { token: string };
    const wsUrl = `${coordinator.url.replace('http', 'ws')}/ws/agent`;
    agent = spawn(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', 'agent', '--url', wsUrl, '--token', token.token, '--labels', 'linux', '--agent-id', 'agent-w'], {
      stdio: 'ignore',
    });
  });

  afterAll(async () => {
    agent.kill('SIGKILL');
    await stopProcess(coordinator);
    await db.end();
    for (const cleanup of after.splice(0)) await cleanup();
  });

  it('a signed push runs the matched workflow on an agent; a repeat is a duplicate', async () => {
    const lock = lockFileWith([pushWorkflow('ci', [runJob('build', ['echo building $GITHUB_SHA', 'test -f README']), runJob('test', ['echo tests pass'], { needs: ['build'] })])]);
    const sha = repo.commit({ '.kici/kici.lock.json': lock, README: 'hello' });
    const first = await postWebhook(coordinator, pushPayload(sha), 'delivery-1');
    assert.equal(first.status, 202);
    assert.deepEqual(await first.json(), { accepted: true, deliveryId: 'delivery-1' });
    const again = await postWebhook(coordinator, pushPayload(sha), 'delivery-1');
    assert.equal(again.status, 200);
    assert.deepEqual(await again.json(), { accepted: true, duplicate: true, deliveryId: 'delivery-1' });
    const run = await eventually(async () => {
      const { rows } = await db.query<{ run_id: string; status: string }>("select run_id, status from runs where workflow_name = 'ci'");
      return rows[0]?.status === 'success' ? rows[0] : null;
    }, 30_000, 'the webhook run to succeed').catch(async (error: unknown) => {
      const jobs = await db.query('select job_key, status, outcome from jobs');
      const logs = await db.query('select job_key, step_index, lines from job_logs order by id');
      throw new Error(`${String(error)}\n${JSON.stringify(jobs.rows)}\n${JSON.stringify(logs.rows)}`);
    });
    const jobs = await db.query<{ job_key: string; status: string }>('select job_key, status from jobs where run_id = $1 order by job_key', [run.run_id]);
    assert.deepEqual(jobs.rows, [{ job_key: 'build', status: 'success' }, { job_key: 'test', status: 'success' }]);
    assert.equal(await deliveryStatus(db, 'delivery-1'), 'processed');
    const runs = await db.query('select run_id from runs');
    assert.equal(runs.rowCount, 1, 'one run for one delivery, however often it arrives');
  });

  it('one delivery posted five times at once is accepted once and makes one run (each is processed as it is recorded)', async () => {
    const sha = repo.commit({ '.kici/kici.lock.json': lockFileWith([pushWorkflow('burst', [runJob('only', ['true'])])]) }, 'burst');
    const answers = await Promise.all(Array.from({ length: 5 }, () => postWebhook(coordinator, pushPayload(sha), 'delivery-burst')));
    assert.deepEqual(answers.map((answer) => answer.status).sort(), [200, 200, 200, 200, 202]);
    await eventually(async () => ((await deliveryStatus(db, 'delivery-burst')) === 'processed' ? true : null), 30_000, 'the delivery to be processed');
    const runs = await db.query("select run_id from runs where workflow_name = 'burst'");
    assert.equal(runs.rowCount, 1);
  });

  it('answers bad requests with a status and a reason and keeps serving', async () => {
    const sha = repo.commit({ 'other.txt': 'x' });
    const badSignature = await postWebhook(coordinator, pushPayload(sha), 'delivery-bad', 'sha256=' + '0'.repeat(64));
    assert.equal(badSignature.status, 401);
    const noEvent = await fetch(`${coordinator.url}/webhooks/github`, { method: 'POST', body: '{}', headers: { 'x-hub-signature-256': await sign(SECRET, '{}') } });
    assert.equal(noEvent.status, 400);
    const garbage = 'not json {';
    const malformed = await fetch(`${coordinator.url}/webhooks/github`, {
      method: 'POST',
      body: garbage,
      headers: { 'x-github-event': 'push', 'x-github-delivery': 'd-garbage', 'x-hub-signature-256': await sign(SECRET, garbage) },
    });
    assert.equal(malformed.status, 400);
    assert.equal(((await malformed.json()) as { error: string }).error, 'malformed body');
    const huge = await fetch(`${coordinator.url}/webhooks/github`, { method: 'POST', body: Buffer.alloc(26 * 1024 * 1024, 32) }).catch(() => null);
    assert.ok(huge === null || huge.status === 413, 'an oversized body is refused');
    const unknownSource = await fetch(`${coordinator.url}/webhooks/generic/nope`, { method: 'POST', body: '{}' });
    assert.equal(unknownSource.status, 404);
    assert.equal((await fetch(`${coordinator.url}/healthz`)).status, 200);
  });

  it('a commit without a lock file is lockfile_missing; a corrupt one fails a run with lock_resolution', async () => {
    const missing = repo.commit({ '.kici/kici.lock.json': '' }, 'empty lock');
    await postWebhook(coordinator, pushPayload(missing), 'delivery-corrupt');
    await eventually(async () => (await deliveryStatus(db, 'delivery-corrupt')) === 'lockfile_corrupt', 15_000, 'corrupt');
    const failed = await db.query<{ init_failure: { category: string } }>("select init_failure from runs where workflow_name = '(unresolved workflow)'");
    assert.equal(failed.rows[0]?.init_failure.category, 'lock_resolution');
  });

  it('paths: a push that changes only docs starts no src/** run; a forced push compared in git that touches src/ does', async () => {
    const srcOnly = { ...pushWorkflow('src-only', [runJob('only', ['true'])]), triggers: [{ _type: 'push', branches: [], paths: ['src/**', '!**/*.md'] }] };
    const lock = lockFileWith([srcOnly, pushWorkflow('always', [runJob('only', ['true'])])]);
    const before = repo.commit({ '.kici/kici.lock.json': lock }, 'paths lock');
    const docs = repo.commit({ 'docs/guide.md': 'words', 'src/notes.md': 'notes' }, 'docs only');
    const listed = [{ id: docs, added: ['docs/guide.md', 'src/notes.md'], modified: [], removed: [] }];
    await postWebhook(coordinator, { ...pushPayload(docs), before, created: false, commits: listed }, 'delivery-docs');
    await eventually(async () => ((await deliveryStatus(db, 'delivery-docs')) === 'processed' ? true : null), 30_000, 'the docs push to be processed');
    const docsRuns = await db.query<{ workflow_name: string }>("select r.workflow_name from runs r where r.run_id = any(select json_array_elements_text(outcome->'runIds') from deliveries where delivery_id = 'delivery-docs')");
    assert.deepEqual(docsRuns.rows.map((r) => r.workflow_name), ['always'], 'only the workflow without paths ran');
    const code = repo.commit({ 'src/main.ts': 'export {}' }, 'code');
    // A forced push lists no trustworthy commits: the files come from `git diff before...after`.
    await postWebhook(coordinator, { ...pushPayload(code), before: docs, created: false, forced: true }, 'delivery-code');
    await eventually(async () => ((await deliveryStatus(db, 'delivery-code')) === 'processed' ? true : null), 30_000, 'the code push to be processed');
    const codeRuns = await db.query<{ workflow_name: string; status: string }>("select r.workflow_name, r.status from runs r where r.run_id = any(select json_array_elements_text(outcome->'runIds') from deliveries where delivery_id = 'delivery-code') order by 1");
    assert.deepEqual(codeRuns.rows.map((r) => r.workflow_name), ['always', 'src-only']);
  });

  it('B3: a transient lock-file failure is retried, never recorded as missing, and survives a crash', async () => {
    const unknownSha = 'f'.repeat(40);
    await postWebhook(coordinator, pushPayload(unknownSha), 'delivery-transient');
    await eventually(async () => (await deliveryStatus(db, 'delivery-transient')) === 'retrying', 15_000, 'retrying');
    coordinator.child.kill('SIGKILL');
    await coordinator.exited;
    await db.query("update deliveries set next_attempt_at = 0 where delivery_id = 'delivery-transient'");
    coordinator = await startCoordinatorProcess({ DATABASE_URL: databaseUrl, GITHUB_WEBHOOK_SECRET: SECRET, SWITCHYARD_COORDINATOR_ID: 'coord-w' });
    await eventually(async () => (await deliveryStatus(db, 'delivery-transient')) === 'retrying', 15_000, 'retried after restart');
    const { rows } = await db.query<{ attempts: number; last_error: string }>("select attempts, last_error from deliveries where delivery_id = 'delivery-transient'");
    assert.ok((rows[0]?.attempts ?? 0) >= 2, 'the restarted coordinator picked the delivery up again');
    assert.match(rows[0]?.last_error ?? '', /not present/);
  });
});
