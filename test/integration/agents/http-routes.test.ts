import assert from 'node:assert/strict';
import { it } from 'node:test';
import { TOKEN_PATTERN, validateAgentToken } from '../../../src/db/agent-tokens.ts';
import { appendLogChunk } from '../../../src/db/job-logs.ts';
import { describeEachKind, withTestDatabase } from '../../support/database.ts';
import { insertRun, startApiServer, type ApiServer } from './api-server.ts';
import type { Database } from '../../../src/db/database.ts';

const T0 = 1_700_000_000_000;

async function withServer(kind: 'external' | 'embedded', fn: (api: ApiServer, database: Database) => Promise<void>) {
  await withTestDatabase(kind, async (database) => {
    const api = await startApiServer(database.db, T0);
    try {
      await fn(api, database);
    } finally {
      await api.close();
    }
  });
}

const post = (api: ApiServer, body: unknown) =>
  api.call('/api/v1/agent-tokens', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });

await describeEachKind('agent-token routes', (kind) => {
  it('POST creates a static token shown once, and the token validates', () =>
    withServer(kind, async (api, { db }) => {
      const response = await post(api, { labels: ['gpu', 'gpu', 'kici:role:builder'], mandatoryLabels: ['team:a'], expiresInSeconds: 3600 });
      assert.equal(response.status, 201);
      const body = (await response.json()) as Record<string, unknown>;
      assert.deepEqual(Object.keys(body).sort(), ['expiresAt', 'id', 'labels', 'mandatoryLabels', 'prefix', 'token']);
      assert.match(String(body['token']), TOKEN_PATTERN);
      assert.equal(body['prefix'], String(body['token']).slice(0, 12));
      assert.deepEqual(body['labels'], ['gpu', 'kici:role:builder'], 'duplicates dropped');
      assert.deepEqual(body['mandatoryLabels'], ['team:a']);
      assert.equal(body['expiresAt'], T0 + 3_600_000);
      const record = await validateAgentToken(db, String(body['token']), T0 + 1);
      assert.equal(record?.id, body['id']);
      assert.equal(record?.agentType, 'static');
    }));

  it('POST with an empty body creates an unscoped token without expiry', () =>
    withServer(kind, async (api) => {
      const response = await api.call('/api/v1/agent-tokens', { method: 'POST' });
      assert.equal(response.status, 201);
      const body = (await response.json()) as Record<string, unknown>;
      assert.equal(body['labels'], null);
      assert.deepEqual(body['mandatoryLabels'], []);
      assert.equal(body['expiresAt'], null);
    }));

  it('POST refuses invalid bodies with 400 and a reason', () =>
    withServer(kind, async (api) => {
      const cases: [unknown, RegExp][] = [
        [{ labels: 'gpu' }, /^labels: /],
        [{ labels: [''] }, /^labels\.0: /],
        [{ mandatoryLabels: ['has space'] }, /whitespace/],
        [{ expiresInSeconds: 0 }, /^expiresInSeconds: /],
        [{ expiresInSeconds: 1.5 }, /^expiresInSeconds: /],
        [{ kind: 'ephemeral' }, /^kind: /],
        [{ mandatory_labels: ['x'] }, /mandatory_labels/],
        [[1], /^body: /],
      ];
      for (const [body, reason] of cases) {
        const response = await post(api, body);
        assert.equal(response.status, 400, JSON.stringify(body));
        const answer = (await response.json()) as { error: string; reason: string };
        assert.equal(answer.error, 'invalid request');
        assert.match(answer.reason, reason, JSON.stringify(body));
      }
      const malformed = await api.call('/api/v1/agent-tokens', { method: 'POST', body: '{' });
      assert.equal(malformed.status, 400);
      assert.equal(((await malformed.json()) as { error: string }).error, 'malformed body');
      assert.deepEqual(await (await api.call('/api/v1/agent-tokens')).json(), { tokens: [], nextCursor: null }, 'nothing was created');
    }));

  it('GET lists tokens by prefix only, never the hash or the token', () =>
    withServer(kind, async (api) => {
      const created = (await (await post(api, { labels: ['gpu'] })).json()) as { id: string; token: string; prefix: string };
      const response = await api.call('/api/v1/agent-tokens');
      assert.equal(response.status, 200);
      const text = await response.text();
      assert.ok(!text.includes(created.token) && !text.includes(created.token.slice(12)) && !/hash/i.test(text));
      const { tokens } = JSON.parse(text) as { tokens: Record<string, unknown>[] };
      assert.equal(tokens.length, 1);
      assert.equal(tokens[0]?.['prefix'], created.prefix);
      assert.equal(tokens[0]?.['agentType'], 'static');
    }));

  it('DELETE revokes, calls onRevoked and the token no longer validates; unknown ids are 404', () =>
    withServer(kind, async (api, { db }) => {
      const created = (await (await post(api, {})).json()) as { id: string; token: string };
      api.clock.now = T0 + 50;
      const response = await api.call(`/api/v1/agent-tokens/${created.id}`, { method: 'DELETE' });
      assert.equal(response.status, 200);
      assert.deepEqual(await response.json(), { id: created.id, revoked: true });
      assert.deepEqual(api.revoked.map((r) => [r.id, r.revokedAt]), [[created.id, T0 + 50]]);
      assert.equal(await validateAgentToken(db, created.token, T0 + 51), null);
      const missing = await api.call('/api/v1/agent-tokens/does-not-exist', { method: 'DELETE' });
      assert.equal(missing.status, 404);
      assert.equal(api.revoked.length, 1, 'no callback for an unknown id');
    }));

  it('every route needs the admin bearer token', () =>
    withServer(kind, async (api) => {
      for (const [method, path] of [
        ['GET', '/api/v1/agent-tokens'],
        ['POST', '/api/v1/agent-tokens'],
        ['DELETE', '/api/v1/agent-tokens/x'],
        ['GET', '/api/v1/runs/r/logs'],
        ['GET', '/api/v1/runs/r/jobs/build/logs'],
      ] as const) {
        const anonymous = await fetch(`${api.url}${path}`, { method });
        assert.equal(anonymous.status, 401, `${method} ${path}`);
        const wrong = await fetch(`${api.url}${path}`, { method, headers: { authorization: 'Bearer nope' } });
        assert.equal(wrong.status, 401, `${method} ${path}`);
      }
    }));
});

await describeEachKind('log routes', (kind) => {
  async function seed(database: Database) {
    await insertRun(database.db, 'run-1');
    const chunk = (jobKey: string, stepIndex: number, lines: string[]) =>
      appendLogChunk(database.db, { runId: 'run-1', jobKey, dispatchId: `d-${jobKey}`, stepIndex, lines, now: T0 });
    await chunk('build', -1, ['runner up']);
    await chunk('build', 0, ['compiling', 'done']);
    await chunk('test', 0, ['ok 1']);
    await chunk('build', 1, ['linking']);
  }

  it('GET /runs/:id/logs returns every chunk in order, filtered by ?job= and ?step=', () =>
    withServer(kind, async (api, database) => {
      await seed(database);
      const all = (await (await api.call('/api/v1/runs/run-1/logs')).json()) as { runId: string; chunks: { jobKey: string; stepIndex: number; lines: string[] }[] };
      assert.equal(all.runId, 'run-1');
      assert.deepEqual(all.chunks.map((c) => `${c.jobKey}#${c.stepIndex}`), ['build#-1', 'build#0', 'test#0', 'build#1']);
      const build0 = (await (await api.call('/api/v1/runs/run-1/logs?job=build&step=0')).json()) as typeof all;
      assert.deepEqual(build0.chunks.map((c) => c.lines), [['compiling', 'done']]);
      const step0 = (await (await api.call('/api/v1/runs/run-1/logs?step=0')).json()) as typeof all;
      assert.deepEqual(step0.chunks.map((c) => c.jobKey), ['build', 'test']);
    }));

  it('GET /runs/:id/jobs/:job/logs serves one job, with ?step= and as text/plain', () =>
    withServer(kind, async (api, database) => {
      await seed(database);
      const json = (await (await api.call('/api/v1/runs/run-1/jobs/build/logs?step=-1')).json()) as { chunks: { lines: string[]; dispatchId: string }[] };
      assert.deepEqual(json.chunks.map((c) => [c.dispatchId, c.lines]), [['d-build', ['runner up']]]);
      const text = await api.call('/api/v1/runs/run-1/jobs/build/logs', { headers: { accept: 'text/plain' } });
      assert.equal(text.status, 200);
      assert.match(text.headers.get('content-type') ?? '', /^text\/plain/);
      assert.equal(await text.text(), '[build › runner] runner up\n[build › step 0] compiling\n[build › step 0] done\n[build › step 1] linking\n');
      const none = await api.call('/api/v1/runs/run-1/jobs/absent/logs', { headers: { accept: 'text/plain' } });
      assert.equal(await none.text(), '');
    }));

  it('an unknown run is 404 and a bad step or limit is 400', () =>
    withServer(kind, async (api, database) => {
      await seed(database);
      assert.equal((await api.call('/api/v1/runs/nope/logs')).status, 404);
      assert.equal((await api.call('/api/v1/runs/nope/jobs/build/logs')).status, 404);
      for (const query of ['step=1.5', 'step=-2', 'limit=0', 'after=-1']) {
        const response = await api.call(`/api/v1/runs/run-1/logs?${query}`);
        assert.equal(response.status, 400, query);
      }
    }));

  it('pages with ?limit= and ?after=', () =>
    withServer(kind, async (api, database) => {
      await seed(database);
      type Page = { chunks: { id: number; jobKey: string; stepIndex: number }[] };
      const first = (await (await api.call('/api/v1/runs/run-1/logs?limit=3')).json()) as Page;
      assert.equal(first.chunks.length, 3);
      const next = (await (await api.call(`/api/v1/runs/run-1/logs?after=${first.chunks[2]?.id}`)).json()) as Page;
      assert.deepEqual(next.chunks.map((c) => `${c.jobKey}#${c.stepIndex}`), ['build#1']);
    }));
});
