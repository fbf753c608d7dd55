import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { SECRET_OUTPUT_INFO, UPLOAD_INFO, generateX25519, sealEnvelope } from '../../../src/secrets/crypto.ts';
import { skipReason } from '../../support/database.ts';
import { CoordinatorClient, FakeAgent, dropDatabase } from '../../support/fake-agent.ts';
import type { JobDispatchFrame } from '../../support/fake-agent.ts';
import { ADMIN_TOKEN, after as processCleanups, sharedDatabaseUrl, startCoordinatorProcess, stopProcess } from '../../support/processes.ts';
import type { CoordinatorProcess } from '../../support/processes.ts';
import { call, dumpAllTables, query, secretJob } from './support.ts';

/** Values that must never be stored or logged in clear; the last test looks for each of them everywhere. */
const planted = {
  repoApiKey: `PLANTED-repo-${randomBytes(12).toString('hex')}`,
  repoEnvDb: `PLANTED-db-${randomBytes(12).toString('hex')}`,
  secretOutput: `PLANTED-output-${randomBytes(12).toString('hex')}`,
  testRunFlat: `PLANTED-blob-${randomBytes(12).toString('hex')}`,
};

describe('secrets end to end: storage, dispatch, redaction, secret outputs and test runs (external Postgres)', { skip: await skipReason('external') }, () => {
  let databaseUrl: string;
  let coordinator: CoordinatorProcess;
  let client: CoordinatorClient;
  let token: string;
  const agents: FakeAgent[] = [];
  const put = (scope: string, key: string, value: string) => call(coordinator, 'PUT', `/api/v1/secrets/${encodeURIComponent(scope)}/${key}`, { value });

  before(async () => {
    databaseUrl = await sharedDatabaseUrl('external');
    coordinator = await startCoordinatorProcess({ DATABASE_URL: databaseUrl, SWITCHYARD_SECRET_KEY: randomBytes(32).toString('hex'), LOG_LEVEL: 'trace' });
    client = new CoordinatorClient(coordinator.url, ADMIN_TOKEN);
    token = (await client.createToken()).token;
    // The jobs below name environment prod; it exists and does not take test-run secrets.
    const prod = await call(coordinator, 'PUT', '/api/v1/environments/prod', { allowLocalExecution: false });
    assert.equal(prod.status, 201);
  });
  after(async () => {
    for (const agent of agents.splice(0)) await agent.close();
    await stopProcess(coordinator);
    await dropDatabase(databaseUrl);
    for (const fn of processCleanups.splice(0)) await fn();
  });

  async function agentFor(label: string): Promise<FakeAgent> {
    const agent = await FakeAgent.connect(client.wsUrl, token, { labels: [label] });
    agents.push(agent);
    return agent;
  }

  async function secretRowCount(): Promise<number> {
    return Number((await query<{ n: string }>(databaseUrl, 'SELECT count(*) AS n FROM secrets'))[0]?.n);
  }

  it('PUT, GET, DELETE and rotate-key, with every bad input refused with a reason and nothing stored', async () => {
    assert.equal((await put('repo:acme/app', 'API_KEY', planted.repoApiKey)).status, 201);
    const spelledOut = await call(coordinator, 'PUT', '/api/v1/secrets/repo:acme/app/env:prod/DB_PASSWORD', { value: planted.repoEnvDb });
    assert.deepEqual([spelledOut.status, spelledOut.body['scope']], [201, 'repo:acme/app/env:prod']);
    for (const [scope, key, value] of [
      ['global', 'API_KEY', 'global-api-key-value'],
      ['org:acme', 'API_KEY', 'org-api-key-value'],
      ['env:prod', 'DB_PASSWORD', 'env-prod-db-password'],
      ['env:staging', 'STAGING_ONLY', 'staging-only-value'],
      ['repo:other/app', 'OTHER_REPO', 'other-repo-value'],
      ['global', 'SHARED', 'global-shared-value'],
    ] as const) {
      assert.equal((await put(scope, key, value)).status, 201, `${scope} ${key}`);
    }
    assert.equal((await put('global', 'SHARED', 'global-shared-value')).status, 200, 'a second PUT updates');
    const listing = await call(coordinator, 'GET', '/api/v1/secrets');
    const names = (listing.body['secrets'] as { scope: string; key: string; updatedAt: number }[]).map((s) => `${s.scope} ${s.key}`);
    assert.ok(names.includes('repo:acme/app API_KEY') && names.includes('repo:acme/app/env:prod DB_PASSWORD') && names.length === 8);
    const listed = JSON.stringify(listing.body);
    for (const value of [planted.repoApiKey, planted.repoEnvDb, 'global-shared-value']) assert.ok(!listed.includes(value), 'a listing never holds values');

    const before = await secretRowCount();
    const bad: [string, string, unknown, number, RegExp][] = [
      ['PUT', '/api/v1/secrets/team%3Ax/KEY', { value: 'v' }, 400, /unknown scope "team:x": a scope is global, org:<owner>/],
      ['PUT', '/api/v1/secrets/repo:a/b/c/KEY', { value: 'v' }, 400, /unknown scope/],
      ['PUT', '/api/v1/secrets/global/bad-key', { value: 'v' }, 400, /must be a variable name/],
      ['PUT', '/api/v1/secrets/global/BIG', { value: 'x'.repeat(64 * 1024 + 1) }, 413, /65537 bytes; the limit is 65536 bytes/],
      ['PUT', '/api/v1/secrets/global/NUM', { value: 5 }, 400, /value must be a string/],
      ['PUT', '/api/v1/secrets/global/EMPTY', { value: '' }, 400, /must not be empty/],
      ['PUT', '/api/v1/secrets/global/EXTRA', { value: 'v', scope: 'x' }, 400, /.+/],
      ['DELETE', '/api/v1/secrets/global/NOPE', undefined, 404, /no secret NOPE in scope global/],
      ['DELETE', '/api/v1/secrets/env%3A/KEY', undefined, 400, /unknown scope/],
    ];
    for (const [method, path, body, status, reason] of bad) {
      const answer = await call(coordinator, method, path, body);
      assert.equal(answer.status, status, `${method} ${path}: ${JSON.stringify(answer.body)}`);
      assert.match(String(answer.body['reason']), reason, `${method} ${path}`);
    }
    assert.equal(await secretRowCount(), before, 'no bad input stored anything');

    assert.equal((await put('global', 'DOOMED', 'doomed-value')).status, 201);
    assert.equal((await call(coordinator, 'DELETE', '/api/v1/secrets/global/DOOMED')).status, 200);
    assert.equal((await call(coordinator, 'DELETE', '/api/v1/secrets/global/DOOMED')).status, 404);

    const rotated = await call(coordinator, 'POST', '/api/v1/secrets/rotate-key');
    assert.equal(rotated.status, 200);
    assert.deepEqual(rotated.body['rotated'], { secrets: 8, run_keys: 0, test_uploads: 0, attempt_secrets: 0, alreadyCurrent: 8 });
    const audit = await query<{ action: string; keys: string[] }>(databaseUrl, `SELECT action, keys FROM secret_audit WHERE action IN ('put','delete','rotate') ORDER BY id`);
    assert.deepEqual(audit.filter((a) => a.action === 'delete').map((a) => a.keys), [['DOOMED']]);
  });

  it('a dispatch carries the resolved values in its top-level fields only; what the agent echoes back is stored masked', async () => {
    const label = `sec-${randomUUID().slice(0, 8)}`;
    const agent = await agentFor(label);
    const created = await call(coordinator, 'POST', '/api/v1/runs', { repository: 'acme/app', workflow: { name: 'deploy-wf', jobs: [secretJob('deploy', label, { environment: 'prod' })] } });
    assert.equal(created.status, 201);
    const runId = String(created.body['runId']);
    const dispatch = await agent.dispatch(0);
    assert.deepEqual(dispatch.secrets, { API_KEY: planted.repoApiKey, DB_PASSWORD: planted.repoEnvDb, SHARED: 'global-shared-value' }, 'the narrowest scope wins per key');
    assert.deepEqual(dispatch.namespacedSecrets, { prod: { DB_PASSWORD: planted.repoEnvDb } });
    assert.match(String(dispatch.runPublicKey), /^[A-Za-z0-9+/]+=*$/);
    assert.ok(!JSON.stringify(dispatch.jobConfig).includes(planted.repoApiKey), 'jobConfig holds no secret');

    echoSecretsBack(agent, dispatch);
    const view = await client.waitForRunStatus(runId, 'failed');
    const job = view.jobs[0];
    assert.equal(job?.outcome, 'deploy failed: *** (password ***)');
    assert.equal(job?.steps.find((s) => s.index === 0)?.error, 'bad ***', 'the step result of the terminal status, masked');
    const stepEvents = (await client.journal(runId)).filter((e) => e.type === 'agent.step.status') as unknown as { step: { error: string | null } }[];
    assert.deepEqual(stepEvents.map((e) => e.step.error), ['curl https://api/***?x=1 failed'], 'the journaled step.status is masked');
    const lines = (await client.logs(runId)).flatMap((c) => c.lines);
    assert.deepEqual(lines, ['using ***', 'db=*** done', `token ***`]);
    const audit = await query<{ keys: string[]; outcome: string; job_key: string; actor: string; dispatch_id: string }>(
      databaseUrl,
      `SELECT keys, outcome, job_key, actor, dispatch_id FROM secret_audit WHERE run_id = $1 AND action = 'resolve'`,
      [runId],
    );
    assert.deepEqual(audit.map(({ actor: _a, ...rest }) => rest), [{ keys: ['API_KEY', 'DB_PASSWORD', 'SHARED', 'prod/DB_PASSWORD'], outcome: 'resolved', job_key: 'deploy', dispatch_id: dispatch.jobId }]);
    assert.match(audit[0]?.actor ?? '', /^coordinator:/);
  });

  it('registry tokens and install secrets the workflow references reach only npmRegistries and installEnvSecrets; an unanswered one fails the job', async () => {
    const label = `ref-${randomUUID().slice(0, 8)}`;
    const agent = await agentFor(label);
    const references = { registries: [{ url: 'https://npm.example.test/', scope: '@acme', tokenSecret: 'prod:DB_PASSWORD', alwaysAuth: true }], installEnv: [':API_KEY'] };
    const created = await call(coordinator, 'POST', '/api/v1/runs', { repository: 'acme/app', workflow: { name: 'refs-wf', ...references, jobs: [secretJob('install', label)] } });
    assert.equal(created.status, 201);
    const dispatch = await agent.dispatch(0);
    assert.deepEqual(dispatch.npmRegistries, [{ url: 'https://npm.example.test/', scope: '@acme', alwaysAuth: true, token: planted.repoEnvDb }]);
    assert.deepEqual(dispatch.installEnvSecrets, { API_KEY: planted.repoApiKey });
    assert.ok(!JSON.stringify(dispatch.jobConfig).includes(planted.repoEnvDb), 'jobConfig holds no secret');
    agent.runAtOnce(dispatch);
    await client.waitForRunStatus(String(created.body['runId']), 'success');
    const missing = await call(coordinator, 'POST', '/api/v1/runs', { repository: 'acme/app', workflow: { name: 'refs-missing', installEnv: ['qa:NOWHERE'], jobs: [secretJob('install', label)] } });
    const failed = await client.waitForRunStatus(String(missing.body['runId']), 'failed');
    assert.match(String(failed.jobs[0]?.outcome), /^secret_resolution: the secret qa:NOWHERE the workflow references is not stored in any scope of acme\/app/);
  });

  it('secret outputs: job A’s output, encrypted to the run key, reaches job B’s secrets; the API masks it unless revealed', async () => {
    const label = `out-${randomUUID().slice(0, 8)}`;
    const agent = await agentFor(label);
    const workflow = { name: 'outputs-wf', jobs: [secretJob('build', label), secretJob('ship', label, { needs: ['build'] })] };
    const runId = String((await call(coordinator, 'POST', '/api/v1/runs', { repository: 'acme/app', workflow })).body['runId']);
    const build = await agent.dispatch(0);
    const sealed = sealEnvelope(String(build.runPublicKey), planted.secretOutput, SECRET_OUTPUT_INFO);
    const secretOutputs = { DEPLOY_TOKEN: { agentPublicKey: sealed.senderPublicKey, encrypted: sealed.encrypted } };
    agent.ack(build);
    agent.send({ type: 'job.status', messageId: randomUUID(), runId, jobId: build.jobId, state: 'success', timestamp: Date.now(), data: { durationMs: 1 }, secretOutputs });
    const ship = await agent.dispatch(1);
    assert.equal(ship.runPublicKey, build.runPublicKey, 'one key pair per run');
    assert.equal(ship.secrets?.['DEPLOY_TOKEN'], planted.secretOutput);
    assert.equal(ship.secrets?.['API_KEY'], planted.repoApiKey, 'a stored secret keeps its key over an output of the same name');
    agent.ack(ship);
    agent.send({ type: 'job.status', messageId: randomUUID(), runId, jobId: ship.jobId, state: 'success', timestamp: Date.now(), data: { durationMs: 1, outputs: { 'use-secret': { url: `https://x/${planted.secretOutput}` } } } });
    const done = await client.waitForRunStatus(runId, 'success');
    assert.deepEqual(done.jobs.find((j) => j.job_key === 'ship')?.outputs, { 'use-secret': { url: 'https://x/***' } }, 'a secret echoed into plain outputs is masked');
    const stored = await query<{ encrypted: string; job_key: string }>(databaseUrl, 'SELECT encrypted, job_key FROM secret_outputs WHERE run_id = $1', [runId]);
    assert.deepEqual(stored, [{ encrypted: sealed.encrypted, job_key: 'build' }], 'stored as received');
    const masked = await call(coordinator, 'GET', `/api/v1/runs/${runId}/secret-outputs`);
    assert.deepEqual((masked.body['outputs'] as object[]).map((o) => ({ ...o, createdAt: 0 })), [{ jobKey: 'build', name: 'DEPLOY_TOKEN', value: '***', createdAt: 0 }]);
    const revealed = await call(coordinator, 'GET', `/api/v1/runs/${runId}/secret-outputs?reveal=true`);
    assert.equal((revealed.body['outputs'] as { value: string }[])[0]?.value, planted.secretOutput);
    assert.equal((await call(coordinator, 'GET', `/api/v1/runs/${randomUUID()}/secret-outputs`)).status, 404);
    const reveals = await query<{ keys: string[] }>(databaseUrl, `SELECT keys FROM secret_audit WHERE run_id = $1 AND action = 'reveal'`, [runId]);
    assert.deepEqual(reveals, [{ keys: ['build/DEPLOY_TOKEN'] }]);
  });

  it('a test run: a blob built as a client builds it overrides stored secrets at dispatch and stays encrypted at rest', async () => {
    const label = `test-${randomUUID().slice(0, 8)}`;
    const agent = await agentFor(label);
    const upload = await call(coordinator, 'POST', '/api/v1/test-uploads');
    assert.equal(upload.status, 201);
    const blob = sealEnvelope(String(upload.body['publicKey']), JSON.stringify({ flat: { API_KEY: planted.testRunFlat }, contexts: { prod: { DB_PASSWORD: 'blob-db' } } }), UPLOAD_INFO);
    const body = { repository: 'acme/app', workflow: { name: 'test-wf', jobs: [secretJob('unit', label)] }, uploadId: upload.body['uploadId'], encryptedSecrets: blob.encrypted, encryptedSecretsKey: blob.senderPublicKey };
    const created = await call(coordinator, 'POST', '/api/v1/test-runs', body);
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const runId = String(created.body['runId']);
    const dispatch = await agent.dispatch(0);
    assert.deepEqual(dispatch.secrets, { API_KEY: planted.testRunFlat, SHARED: 'global-shared-value' });
    agent.runAtOnce(dispatch);
    await client.waitForRunStatus(runId, 'success');
    const [stored] = await query<{ encrypted_secrets: string }>(databaseUrl, 'SELECT encrypted_secrets FROM test_run_secrets WHERE run_id = $1', [runId]);
    assert.equal(stored?.encrypted_secrets, blob.encrypted);
    const [summary] = await query<{ input_summary: string }>(databaseUrl, 'SELECT input_summary::text FROM runs WHERE run_id = $1', [runId]);
    assert.ok(!summary?.input_summary.includes(blob.encrypted), 'the blob is not in the run input summary');

    const prod = await call(coordinator, 'POST', '/api/v1/test-runs', { ...body, workflow: { name: 'test-prod', jobs: [secretJob('deploy', label, { environment: 'prod' })] } });
    const failed = await client.waitForRunStatus(String(prod.body['runId']), 'failed');
    assert.match(String(failed.jobs[0]?.outcome), /^secret_resolution: environment prod does not allow local execution/);
  });

  it('test runs refuse bad input with a reason and store nothing: both-or-neither, undecryptable blob, unknown or expired upload', async () => {
    const upload = await call(coordinator, 'POST', '/api/v1/test-uploads');
    const good = sealEnvelope(String(upload.body['publicKey']), JSON.stringify({ flat: { A: 'b' } }), UPLOAD_INFO);
    const wrongKey = sealEnvelope(generateX25519().publicKey, JSON.stringify({ flat: { A: 'b' } }), UPLOAD_INFO);
    const notJson = sealEnvelope(String(upload.body['publicKey']), 'flat=A', UPLOAD_INFO);
    const expired = await call(coordinator, 'POST', '/api/v1/test-uploads');
    await query(databaseUrl, 'UPDATE test_uploads SET expires_at = 1 WHERE upload_id = $1', [expired.body['uploadId']]);
    const base = { repository: 'acme/app', workflow: { name: 'bad', jobs: [secretJob('unit', 'nobody')] }, uploadId: upload.body['uploadId'] };
    const counts = async () => query<{ runs: string; blobs: string }>(databaseUrl, 'SELECT (SELECT count(*) FROM runs) AS runs, (SELECT count(*) FROM test_run_secrets) AS blobs');
    const before = await counts();
    const cases: [object, number, RegExp][] = [
      [{ ...base, encryptedSecrets: good.encrypted }, 400, /send both or neither/],
      [{ ...base, encryptedSecretsKey: good.senderPublicKey }, 400, /send both or neither/],
      [{ ...base, encryptedSecrets: wrongKey.encrypted, encryptedSecretsKey: wrongKey.senderPublicKey }, 400, /does not decrypt/],
      [{ ...base, encryptedSecrets: notJson.encrypted, encryptedSecretsKey: notJson.senderPublicKey }, 400, /not JSON/],
      [{ ...base, encryptedSecrets: good.encrypted, encryptedSecretsKey: 'bm90IGEga2V5' }, 400, /not a base64 SPKI DER public key/],
      [{ ...base, uploadId: randomUUID(), encryptedSecrets: good.encrypted, encryptedSecretsKey: good.senderPublicKey }, 404, /no test upload/],
      [{ ...base, uploadId: expired.body['uploadId'], encryptedSecrets: good.encrypted, encryptedSecretsKey: good.senderPublicKey }, 410, /expired/],
      [{ ...base, uploadId: undefined, encryptedSecrets: good.encrypted, encryptedSecretsKey: good.senderPublicKey }, 400, /needs the uploadId/],
      [{ ...base, workflow: { name: 'x', jobs: 'no' }, encryptedSecrets: good.encrypted, encryptedSecretsKey: good.senderPublicKey }, 400, /workflow/],
    ];
    for (const [body, status, reason] of cases) {
      const answer = await call(coordinator, 'POST', '/api/v1/test-runs', body);
      assert.equal(answer.status, status, JSON.stringify(answer.body));
      assert.match(String(answer.body['reason']), reason);
    }
    assert.deepEqual(await counts(), before, 'no run and no blob stored');
  });

  it('planted values: no table of the database and no line of the coordinator’s log holds one in clear', async () => {
    const tables = await dumpAllTables(databaseUrl);
    assert.ok(tables.has('secrets') && tables.has('run_events') && tables.has('job_logs') && tables.has('outbox'), 'every table was dumped');
    assert.ok(tables.get('run_events')?.includes('deploy failed: ***') && tables.get('job_logs')?.includes('using ***'), 'the dump holds the masked texts');
    for (const [name, value] of Object.entries(planted)) {
      for (const [table, rows] of tables) assert.ok(!rows.includes(value), `${name} found in table ${table}`);
      assert.ok(!coordinator.output().includes(value), `${name} found in the coordinator log`);
    }
    assert.ok(coordinator.output().includes('job context (redacted)'), 'the log was at a level that shows job.context');
  });
});

/** The agent echoes the values it got into a log chunk, job.context, a step error and the job error. */
function echoSecretsBack(agent: FakeAgent, dispatch: JobDispatchFrame): void {
  const { runId, jobId } = dispatch;
  const apiKey = dispatch.secrets?.['API_KEY'] ?? '';
  const db = dispatch.secrets?.['DB_PASSWORD'] ?? '';
  const now = Date.now;
  agent.ack(dispatch);
  agent.status(dispatch, 'running');
  agent.log(dispatch, 0, [`using ${apiKey}`, `db=${db} done`, `token kat_${'ab'.repeat(32)}`]);
  agent.send({ type: 'job.context', runId, jobId, context: { envVars: [{ name: 'DEPLOY_URL', value: `https://x/${apiKey}` }, { name: 'API_KEY', value: apiKey }], workingDirectory: `/w/${db}` } });
  agent.send({ type: 'step.status', messageId: randomUUID(), runId, jobId, stepIndex: 0, stepName: 'use-secret', state: 'failed', timestamp: now(), data: { error: { message: `curl https://api/${apiKey}?x=1 failed`, exitCode: 1 } } });
  agent.send({ type: 'job.status', messageId: randomUUID(), runId, jobId, state: 'failed', timestamp: now(), data: { error: `deploy failed: ${apiKey} (password ${db})`, stepResults: [{ name: 'use-secret', status: 'failed', durationMs: 1, error: `bad ${apiKey}` }] } });
}
