import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { AGENT_MESSAGE_SCHEMAS, ORCHESTRATOR_MESSAGE_SCHEMAS } from '../../src/ws/messages/parse.ts';
import { skipReason } from '../support/database.ts';
import { CoordinatorClient, dropDatabase, FakeAgent, runStepsWorkflow } from '../support/fake-agent.ts';
import { createLockRepo, lockFileWith, pushWorkflow, runJob } from '../support/lock-repo.ts';
import { ADMIN_TOKEN, after as processCleanups, sharedDatabaseUrl, startCoordinatorProcess, stopProcess } from '../support/processes.ts';
import type { CoordinatorProcess } from '../support/processes.ts';
import { eventually } from '../support/runtime.ts';
import { githubHeaders, pushPayload } from '../support/webhooks.ts';

const SECRET = 'list-routes-secret';

type Listed = Record<string, unknown> & { nextCursor: string | null };

describe('list routes page with cursors; capabilities, deliveries and run events', { skip: await skipReason('external') }, () => {
  let databaseUrl: string;
  let coordinator: CoordinatorProcess;
  let client: CoordinatorClient;
  const agents: FakeAgent[] = [];

  before(async () => {
    databaseUrl = await sharedDatabaseUrl('external');
    coordinator = await startCoordinatorProcess({ DATABASE_URL: databaseUrl, GITHUB_WEBHOOK_SECRET: SECRET });
    client = new CoordinatorClient(coordinator.url, ADMIN_TOKEN);
  });
  after(async () => {
    for (const agent of agents.splice(0)) await agent.close();
    await stopProcess(coordinator);
    await dropDatabase(databaseUrl);
    for (const fn of processCleanups.splice(0)) await fn();
  });

  /** Every page of `path` at `limit` items, following `nextCursor` until it is null. */
  async function allPages(path: string, key: string, limit: number): Promise<{ pages: unknown[][]; items: unknown[] }> {
    const pages: unknown[][] = [];
    let cursor: string | null = null;
    do {
      const join = path.includes('?') ? '&' : '?';
      const query = `${join}limit=${limit}${cursor === null ? '' : `&cursor=${encodeURIComponent(cursor)}`}`;
      const answer: Listed = await client.json<Listed>(`${path}${query}`);
      const page = answer[key] as unknown[];
      pages.push(page);
      cursor = answer.nextCursor;
      assert.ok(pages.length < 50, 'paging ends');
    } while (cursor !== null);
    return { pages, items: pages.flat() };
  }

  async function refusedCursor(path: string): Promise<void> {
    const join = path.includes('?') ? '&' : '?';
    for (const cursor of ['not-a-cursor!', Buffer.from('{"x":1}').toString('base64url'), Buffer.from('[1]').toString('base64url'), 'AAAA']) {
      const response = await coordinator.api(`${path}${join}cursor=${encodeURIComponent(cursor)}`);
      assert.equal(response.status, 400, `${path} cursor ${cursor}`);
      assert.deepEqual(await response.json(), { error: 'invalid cursor', reason: "cursor: not a cursor this list gave out; start again without one" });
    }
    for (const limit of ['0', '-1', 'ten', '1.5']) {
      const response = await coordinator.api(`${path}${join}limit=${limit}`);
      assert.equal(response.status, 400, `${path} limit ${limit}`);
      assert.equal(((await response.json()) as { error: string }).error, 'invalid request');
    }
  }

  it('GET /api/v1/capabilities needs no token and names the version and the protocol messages from the schemas', async () => {
    const response = await fetch(`${coordinator.url}/api/v1/capabilities`);
    assert.equal(response.status, 200);
    const body = (await response.json()) as { name: string; version: string; protocol: { version: number; supportedVersions: number[]; accepts: string[]; sends: string[] } };
    const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };
    assert.equal(body.version, pkg.version);
    assert.deepEqual([body.protocol.version, body.protocol.supportedVersions], [1, [1]]);
    assert.deepEqual(body.protocol.accepts, Object.keys(AGENT_MESSAGE_SCHEMAS).sort());
    assert.deepEqual(body.protocol.sends, Object.keys(ORCHESTRATOR_MESSAGE_SCHEMAS).sort());
    assert.ok(body.protocol.accepts.includes('job.status') && body.protocol.sends.includes('job.dispatch'));
    assert.equal((await fetch(`${coordinator.url}/api/v1/runs`)).status, 401, 'the rest of the API still needs the token');
  });

  it('runs page newest first, filter by repository, and an unknown run has no events', async () => {
    const repository = `acme/pages-${randomUUID().slice(0, 6)}`;
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) {
      const body = JSON.stringify({ repository, workflow: runStepsWorkflow(`w${i}`, 'nobody-has-this', [{ name: 'x', steps: [['s', 'true']] }]) });
      ids.push((await client.json<{ runId: string }>('/api/v1/runs', { method: 'POST', body }, 201)).runId);
    }
    const { pages, items } = await allPages(`/api/v1/runs?repository=${encodeURIComponent(repository)}`, 'runs', 2);
    assert.deepEqual(pages.map((page) => page.length), [2, 2, 1]);
    const listed = (items as { run_id: string; repository: string; created_at: number }[]);
    assert.deepEqual(new Set(listed.map((run) => run.run_id)), new Set(ids), 'every run once, none twice');
    assert.equal(listed.length, 5);
    assert.ok(listed.every((run, i) => run.repository === repository && (i === 0 || (listed[i - 1]?.created_at ?? 0) >= run.created_at)), 'newest first');
    const other = await client.json<{ runs: { run_id: string }[] }>('/api/v1/runs?repository=acme/nothing-here');
    assert.deepEqual(other.runs, []);
    await refusedCursor('/api/v1/runs');

    const unknown = await coordinator.api('/api/v1/runs/no-such-run/events');
    assert.equal(unknown.status, 404);
    assert.deepEqual(await unknown.json(), { error: 'not found', reason: 'no run no-such-run' });
    const known = await client.json<{ events: unknown[] }>(`/api/v1/runs/${ids[0]}/events`);
    assert.ok(known.events.length > 0);

    const waiting = await allPages('/api/v1/jobs?status=pending', 'jobs', 2);
    const full = await client.json<{ jobs: { run_id: string; job_key: string }[]; nextCursor: string | null }>('/api/v1/jobs?status=pending&limit=1000');
    assert.equal(full.nextCursor, null);
    const key = (job: unknown) => `${(job as { run_id: string }).run_id}/${(job as { job_key: string }).job_key}`;
    assert.deepEqual(waiting.items.map(key), full.jobs.map(key), 'the pages are the full list, in order');
    assert.ok(ids.every((id) => full.jobs.some((job) => job.run_id === id)), 'the waiting jobs of these runs are listed');
    await refusedCursor('/api/v1/jobs?status=pending');
    for (const id of ids) await client.cancel(id, { force: true });
  });

  it('a delivery is shown alone with its status, attempts and the runs it created; an unknown one is 404', async () => {
    const repo = await createLockRepo();
    await client.json('/api/v1/repositories', { method: 'POST', body: JSON.stringify({ name: 'acme/app', provider: 'local', path: repo.path }) }, 201);
    const sha = repo.commit({ '.kici/kici.lock.json': lockFileWith([pushWorkflow('ci', [runJob('build', ['true'], { runsOn: [{ kind: 'exact', value: 'nobody' }] })])]) });
    const deliveryIds = ['d-page-1', 'd-page-2', 'd-page-3'];
    for (const deliveryId of deliveryIds) {
      const body = JSON.stringify(pushPayload(sha));
      const response = await fetch(`${coordinator.url}/webhooks/github`, { method: 'POST', body, headers: await githubHeaders(SECRET, body, deliveryId) });
      assert.equal(response.status, 202);
    }
    type DeliveryView = { source: string; deliveryId: string; status: string; attempts: number; error: string | null; runIds: string[] };
    const one = await eventually(async () => {
      const view = await client.json<DeliveryView>('/api/v1/deliveries/d-page-2');
      return view.status === 'processed' ? view : null;
    }, 20_000, 'the delivery to be processed');
    assert.deepEqual([one.source, one.deliveryId, one.attempts, one.error, one.runIds.length], ['github', 'd-page-2', 0, null, 1]);
    const run = await client.json<{ run: { workflow_name: string } }>(`/api/v1/runs/${one.runIds[0] ?? ''}`);
    assert.equal(run.run.workflow_name, 'ci');
    assert.deepEqual(await client.json<DeliveryView>('/api/v1/deliveries/github/d-page-2'), one);
    for (const path of ['/api/v1/deliveries/nope', '/api/v1/deliveries/github/nope', '/api/v1/deliveries/generic:x/d-page-2']) {
      const response = await coordinator.api(path);
      assert.equal(response.status, 404, path);
      assert.equal(((await response.json()) as { error: string }).error, 'not found');
    }
    const { pages, items } = await allPages('/api/v1/deliveries', 'deliveries', 2);
    assert.deepEqual(pages.map((page) => page.length), [2, 1]);
    assert.deepEqual(items.map((d) => (d as { delivery_id: string }).delivery_id).sort(), deliveryIds);
    await refusedCursor('/api/v1/deliveries');
    const retried = await coordinator.api('/api/v1/deliveries/d-page-2/retry', { method: 'POST' });
    assert.equal(retried.status, 202);
    assert.deepEqual(await retried.json(), { source: 'github', deliveryId: 'd-page-2', requeued: true });
    assert.equal((await coordinator.api('/api/v1/deliveries/nope/retry', { method: 'POST' })).status, 404);
    const again = await eventually(async () => {
      const view = await client.json<DeliveryView>('/api/v1/deliveries/d-page-2');
      return view.status === 'processed' ? view : null;
    }, 20_000, 'the retried delivery to be processed again');
    assert.deepEqual(again.runIds, one.runIds, 'processing again creates no second run');
    for (const id of one.runIds) await client.cancel(id, { force: true });
  });

  it('agents, agent tokens, repositories and sources page by cursor, and the lists keep their keys', async () => {
    const { token } = await client.createToken();
    await client.createToken();
    await client.createToken();
    for (const agentId of ['agent-c', 'agent-a', 'agent-b']) agents.push(await FakeAgent.connect(client.wsUrl, token, { agentId }));
    const agentPages = await allPages('/api/v1/agents', 'agents', 2);
    assert.deepEqual(agentPages.pages.map((page) => page.map((a) => (a as { agentId: string }).agentId)), [['agent-a', 'agent-b'], ['agent-c']]);
    await refusedCursor('/api/v1/agents');

    const tokenPages = await allPages('/api/v1/agent-tokens', 'tokens', 2);
    const all = await client.json<{ tokens: { id: string }[]; nextCursor: string | null }>('/api/v1/agent-tokens');
    assert.equal(all.nextCursor, null);
    assert.ok(all.tokens.length >= 3);
    assert.deepEqual(tokenPages.items.map((t) => (t as { id: string }).id), all.tokens.map((t) => t.id));
    await refusedCursor('/api/v1/agent-tokens');

    for (const name of ['zz/one', 'zz/two', 'zz/three']) {
      await client.json('/api/v1/repositories', { method: 'POST', body: JSON.stringify({ name, provider: 'github', token: 'ghs_secret_value' }) }, 201);
    }
    const repoPages = await allPages('/api/v1/repositories', 'repositories', 2);
    const names = repoPages.items.map((r) => (r as { name: string }).name);
    assert.deepEqual(names, [...names].sort(), 'by name');
    assert.ok(['zz/one', 'zz/three', 'zz/two'].every((name) => names.includes(name)));
    assert.ok(!JSON.stringify(repoPages.items).includes('ghs_secret_value'), 'a repository token is never returned');
    assert.ok(repoPages.items.every((r) => (r as { hasToken: boolean }).hasToken !== undefined));
    await refusedCursor('/api/v1/repositories');

    for (const name of ['src-b', 'src-a']) {
      await client.json('/api/v1/sources', { method: 'POST', body: JSON.stringify({ name, verification: 'none', repository: 'acme/app' }) }, 201);
    }
    const sourcePages = await allPages('/api/v1/sources', 'sources', 1);
    assert.deepEqual(sourcePages.pages.map((page) => page.map((s) => (s as { name: string }).name)), [['src-a'], ['src-b']]);
    await refusedCursor('/api/v1/sources');
  });
});
