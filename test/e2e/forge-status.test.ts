import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import type { Server, ServerResponse } from 'node:http';
import { after, afterEach, before, describe, it } from 'node:test';
import { skipReason } from '../support/database.ts';
import { CoordinatorClient, dropDatabase, FakeAgent, runStepsWorkflow } from '../support/fake-agent.ts';
import { ADMIN_TOKEN, after as processCleanups, sharedDatabaseUrl, startCoordinatorProcess, stopProcess } from '../support/processes.ts';
import type { CoordinatorProcess } from '../support/processes.ts';
import { lockFileWith, pushWorkflow, runJob } from '../support/lock-repo.ts';
import { eventually } from '../support/runtime.ts';
import { githubHeaders, pushPayload } from '../support/webhooks.ts';

interface StatusCall {
  path: string;
  authorization: string | undefined;
  idempotencyKey: string | undefined;
  body: { state: string; context: string; description: string; target_url: string };
  /** Set once the fake GitHub answered the call. */
  answered: boolean;
}

/** A stand-in for the GitHub statuses API that records every call; `answer` decides each reply (or holds it). */
class FakeGitHub {
  readonly calls: StatusCall[] = [];
  readonly held: { call: StatusCall; res: ServerResponse }[] = [];
  answer: (call: StatusCall) => number | 'hold' = () => 201;
  /** The lock file the Contents API serves, by commit. */
  readonly lockFiles = new Map<string, string>();
  private server: Server | null = null;

  async start(): Promise<string> {
    this.server = createServer((req, res) => {
      if (req.method === 'GET') return this.contents(req.url ?? '', res);
      const chunks: Buffer[] = [];
      req.on('data', (chunk: Buffer) => chunks.push(chunk));
      req.on('end', () => {
        const call: StatusCall = {
          path: `${req.method} ${req.url}`,
          authorization: req.headers.authorization,
          idempotencyKey: req.headers['x-switchyard-idempotency-key'] as string | undefined,
          body: JSON.parse(Buffer.concat(chunks).toString('utf8')) as StatusCall['body'],
          answered: false,
        };
        this.calls.push(call);
        const status = this.answer(call);
        if (status === 'hold') this.held.push({ call, res });
        else this.reply(call, res, status);
      });
    });
    await new Promise<void>((resolve) => this.server?.listen(0, '127.0.0.1', resolve));
    const address = this.server.address();
    if (address === null || typeof address === 'string') throw new Error('no port');
    return `http://127.0.0.1:${address.port}`;
  }

  /** `GET /repos/acme/app/contents/.kici/kici.lock.json?ref=<sha>`, raw. */
  private contents(url: string, res: ServerResponse): void {
    const lock = this.lockFiles.get(new URL(url, 'http://x').searchParams.get('ref') ?? '');
    if (!url.startsWith('/repos/acme/app/contents/.kici/kici.lock.json') || lock === undefined) {
      res.writeHead(404, { 'content-type': 'application/json' }).end('{"message":"Not Found"}');
      return;
    }
    res.writeHead(200, { 'content-type': 'application/vnd.github.raw' }).end(lock);
  }

  reply(call: StatusCall, res: ServerResponse, status: number): void {
    call.answered = true;
    res.writeHead(status, { 'content-type': 'application/json' });
    res.end(JSON.stringify(status < 300 ? { state: call.body.state } : { message: `HTTP ${status}` }));
  }

  forRun(runId: string): StatusCall[] {
    return this.calls.filter((call) => call.body.target_url.endsWith(`#run=${runId}`));
  }

  async stop(): Promise<void> {
    for (const { call, res } of this.held.splice(0)) this.reply(call, res, 500);
    this.server?.closeAllConnections();
    await new Promise((resolve) => this.server?.close(resolve));
  }
}

const PUBLIC_URL = 'http://ci.example.test:8080';
const WEBHOOK_SECRET = 'forge-webhook-secret';
const STATUS_TOKEN = `ghs_${randomBytes(12).toString('hex')}`;
const sha = () => randomBytes(20).toString('hex');

describe('commit status on GitHub for runs of GitHub repositories', { skip: await skipReason('external') }, () => {
  let databaseUrl: string;
  let coordinator: CoordinatorProcess;
  let client: CoordinatorClient;
  let agentToken: string;
  const github = new FakeGitHub();
  const agents: FakeAgent[] = [];

  before(async () => {
    const apiUrl = await github.start();
    databaseUrl = await sharedDatabaseUrl('external');
    const env = { DATABASE_URL: databaseUrl, SWITCHYARD_GITHUB_API_URL: apiUrl, SWITCHYARD_PUBLIC_URL: PUBLIC_URL, GITHUB_WEBHOOK_SECRET: WEBHOOK_SECRET };
    coordinator = await startCoordinatorProcess(env);
    client = new CoordinatorClient(coordinator.url, ADMIN_TOKEN);
    agentToken = (await client.createToken()).token;
    const registration = { name: 'acme/app', provider: 'github', token: STATUS_TOKEN };
    await client.json('/api/v1/repositories', { method: 'POST', body: JSON.stringify(registration) }, 201);
  });
  afterEach(async () => {
    github.answer = () => 201;
    for (const agent of agents.splice(0)) await agent.close();
  });
  after(async () => {
    await github.stop();
    await stopProcess(coordinator);
    await dropDatabase(databaseUrl);
    for (const fn of processCleanups.splice(0)) await fn();
  });

  it('posts pending when the run starts and success when it ends, for its commit, with the token and a link to the run', async () => {
    const label = `status-${randomUUID().slice(0, 8)}`;
    agents.push(await FakeAgent.connect(client.wsUrl, agentToken, { labels: [label], onDispatch: (d, agent) => agent.runAtOnce(d) }));
    const commit = sha();
    const runId = await client.createRun(runStepsWorkflow('ci', label, [{ name: 'build', steps: [['s', 'true']] }]), { sha: commit });
    await client.waitForRunStatus(runId, 'success');
    const calls = await eventually(() => (github.forRun(runId).length >= 2 ? github.forRun(runId) : null), 10_000, 'two status calls');
    assert.deepEqual(
      calls.map((call) => [call.path, call.authorization, call.idempotencyKey, call.body]),
      [
        [`POST /repos/acme/app/statuses/${commit}`, `Bearer ${STATUS_TOKEN}`, `${runId}:pending`, { state: 'pending', context: 'switchyard/ci', description: 'Running', target_url: `${PUBLIC_URL}/runs/#run=${runId}` }],
        [`POST /repos/acme/app/statuses/${commit}`, `Bearer ${STATUS_TOKEN}`, `${runId}:success`, { state: 'success', context: 'switchyard/ci', description: 'All jobs succeeded', target_url: `${PUBLIC_URL}/runs/#run=${runId}` }],
      ],
    );
  });

  it('a GitHub push webhook: its run reports pending and success on the pushed commit', async () => {
    const label = `push-${randomUUID().slice(0, 8)}`;
    agents.push(await FakeAgent.connect(client.wsUrl, agentToken, { labels: [label], onDispatch: (d, agent) => agent.runAtOnce(d) }));
    const commit = sha();
    github.lockFiles.set(commit, lockFileWith([pushWorkflow('push-ci', [runJob('build', ['true'], { runsOn: [{ kind: 'exact', value: label }] })])]));
    const body = JSON.stringify(pushPayload(commit));
    const accepted = await fetch(`${coordinator.url}/webhooks/github`, { method: 'POST', body, headers: await githubHeaders(WEBHOOK_SECRET, body, `push-${commit}`) });
    assert.equal(accepted.status, 202);
    const onCommit = () => github.calls.filter((call) => call.path.endsWith(`/statuses/${commit}`));
    const calls = await eventually(() => (onCommit().length >= 2 ? onCommit() : null), 20_000, 'two statuses on the pushed commit');
    const runId = new URL(calls[0]?.body.target_url ?? 'http://x').hash.slice('#run='.length);
    assert.equal((await client.run(runId)).run.status, 'success');
    assert.deepEqual(calls.map((call) => [call.authorization, call.body.context, call.body.state]), [
      [`Bearer ${STATUS_TOKEN}`, 'switchyard/push-ci', 'pending'],
      [`Bearer ${STATUS_TOKEN}`, 'switchyard/push-ci', 'success'],
    ]);
  });

  it('a GitHub that does not answer never delays the dispatch; the status is retried, and the final one follows it', async () => {
    const label = `hang-${randomUUID().slice(0, 8)}`;
    const firstOfItsRun = (call: StatusCall) => github.calls.filter((c) => c.body.target_url === call.body.target_url && c.body.state === call.body.state).length === 1;
    github.answer = (call) => (call.body.state === 'pending' && firstOfItsRun(call) ? 'hold' : 201);
    const agent = await FakeAgent.connect(client.wsUrl, agentToken, { labels: [label] });
    agents.push(agent);
    const runId = await client.createRun(runStepsWorkflow('hang', label, [{ name: 'build', steps: [['s', 'true']] }]), { sha: sha() });
    const hung = await eventually(() => github.held.find(({ call }) => call.body.target_url.endsWith(`#run=${runId}`))?.call, 10_000, 'the pending status to reach GitHub');
    // Held until answered below: were the dispatch behind it, this wait would run out.
    const dispatch = await agent.dispatch();
    assert.equal(dispatch.runId, runId);
    assert.ok(!hung.answered && hung.body.state === 'pending', 'the job was dispatched while the pending status request still hangs');
    const held = github.held.splice(0);
    for (const { call, res } of held) github.reply(call, res, 502);
    agent.runAtOnce(dispatch);
    await client.waitForRunStatus(runId, 'success');
    const calls = await eventually(() => (github.forRun(runId).some((c) => c.body.state === 'success') ? github.forRun(runId) : null), 15_000, 'the success status');
    assert.deepEqual(calls.map((call) => [call.body.state, call.idempotencyKey]), [
      ['pending', `${runId}:pending`],
      ['pending', `${runId}:pending`],
      ['success', `${runId}:success`],
    ]);
  });

  it('a failed run reports failure with the failed jobs; a refused status (422) is given up, not retried', async () => {
    const label = `fail-${randomUUID().slice(0, 8)}`;
    github.answer = (call) => (call.body.state === 'pending' ? 422 : 201);
    const onDispatch = (d: { runId: string; jobId: string }, agent: FakeAgent) => {
      agent.ack(d);
      agent.status(d, 'running');
      agent.status(d, 'failed', { error: 'exit 1' });
    };
    agents.push(await FakeAgent.connect(client.wsUrl, agentToken, { labels: [label], onDispatch }));
    const runId = await client.createRun(runStepsWorkflow('broken', label, [{ name: 'build', steps: [['s', 'false']] }]), { sha: sha() });
    await client.waitForRunStatus(runId, 'failed');
    const calls = await eventually(() => (github.forRun(runId).some((c) => c.body.state !== 'pending') ? github.forRun(runId) : null), 10_000, 'the final status');
    // Quick retries run in line: a retried 422 would come five times before the final status.
    assert.deepEqual(calls.map((call) => [call.body.state, call.body.description]), [
      ['pending', 'Running'],
      ['failure', 'Failed jobs: build'],
    ]);
  });

  it('a cancelled run reports error with the cancel reason; a run of a repository that is not on GitHub reports nothing', async () => {
    const runId = await client.createRun(runStepsWorkflow('stuck', `nobody-${randomUUID().slice(0, 8)}`, [{ name: 'build', steps: [['s', 'true']] }]), { sha: sha() });
    await client.cancel(runId, { force: true, reason: 'superseded by a newer push' });
    await client.waitForRunStatus(runId, 'cancelled');
    const calls = await eventually(() => (github.forRun(runId).length >= 2 ? github.forRun(runId) : null), 10_000, 'two status calls');
    assert.deepEqual(calls.map((call) => [call.body.state, call.body.description]), [
      ['pending', 'Running'],
      ['error', 'Cancelled: superseded by a newer push'],
    ]);
    const body = JSON.stringify({ repository: 'acme/elsewhere', sha: sha(), workflow: runStepsWorkflow('other', 'nobody', [{ name: 'x', steps: [['s', 'true']] }]) });
    const other = (await client.json<{ runId: string }>('/api/v1/runs', { method: 'POST', body }, 201)).runId;
    await client.cancel(other, { force: true });
    await client.waitForRunStatus(other, 'cancelled');
    const created = (run: string) => client.journal(run).then((events) => (events[0] as unknown as { input: { forgeStatus?: unknown } }).input);
    assert.deepEqual((await created(runId)).forgeStatus, { context: 'switchyard/stuck' });
    assert.equal((await created(other)).forgeStatus, undefined, 'the run records no status to report');
    assert.deepEqual(github.forRun(other), []);
  });
});
