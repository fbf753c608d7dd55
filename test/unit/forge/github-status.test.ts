import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { after, before, beforeEach, describe, it } from 'node:test';
import { pino } from 'pino';
import type { Effect } from '../../../actors/runs/ports.ts';
import type { RepositoryRegistration } from '../../../src/db/repositories.ts';
import { createGitHubStatusReporter, runPageLink } from '../../../src/forge/github-status.ts';
import type { RunSource } from '../../../src/pipeline/run-source.ts';

const SHA = 'a'.repeat(40);

/** A GitHub stand-in on a real socket: `reply` answers each request, `calls` records them. */
let server: Server;
let apiUrl: string;
const calls: { url: string; body: string }[] = [];
let reply: (req: IncomingMessage, res: ServerResponse) => void = (_req, res) => res.writeHead(201).end('{}');

before(async () => {
  server = createServer((req, res) => {
    let body = '';
    req.on('data', (chunk: Buffer) => (body += chunk.toString()));
    req.on('end', () => {
      calls.push({ url: req.url ?? '', body });
      reply(req, res);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  apiUrl = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
});
after(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

function source(overrides: Partial<RunSource> = {}): RunSource {
  return { repository: 'acme/app', repoUrl: null, ref: 'refs/heads/main', sha: SHA, provider: 'github', event: null, workflow: { name: 'ci', jobs: [] }, ...overrides };
}

const github: RepositoryRegistration = { name: 'acme/app', provider: 'github', path: null, cloneUrl: null, defaultBranch: null, token: 'ghs_token' };

function reporter(options: { source?: RunSource | null; registration?: RepositoryRegistration | null; timeoutMs?: number } = {}) {
  return createGitHubStatusReporter({
    sourceOf: () => Promise.resolve(options.source === undefined ? source() : options.source),
    repository: () => Promise.resolve(options.registration === undefined ? github : options.registration),
    apiUrl,
    runLink: (runId) => runPageLink('http://ci.test', runId),
    log: pino({ level: 'silent' }),
    timeoutMs: options.timeoutMs ?? 10_000,
  });
}

let n = 0;
function status(state: 'pending' | 'success' | 'failure' | 'error', runId = 'run-1'): Effect<'reportForgeStatus'> {
  return { effectId: `${runId}:${++n}:0`, runId, kind: 'reportForgeStatus', payload: { context: 'switchyard/ci', state, description: state } };
}

describe('GitHub commit status reporter', () => {
  beforeEach(() => {
    reply = (_req, res) => res.writeHead(201).end('{}');
  });

  it('a 5xx, a rate limit and a timeout throw (the executor retries); 401, 404 and 422 are given up', async () => {
    const report = reporter();
    for (const [code, headers] of [[500, {}], [502, {}], [429, {}], [403, { 'x-ratelimit-remaining': '0' }]] as const) {
      reply = (_req, res) => res.writeHead(code, headers).end('{"message":"nope"}');
      await assert.rejects(report(status('pending', `run-${code}`)), new RegExp(`answered HTTP ${code}`));
    }
    for (const code of [401, 403, 404, 422]) {
      reply = (_req, res) => res.writeHead(code).end('{"message":"refused"}');
      const before = calls.length;
      await report(status('pending', `refused-${code}`));
      assert.equal(calls.length, before + 1, `${code}: one call, then given up`);
    }
    reply = () => undefined;
    await assert.rejects(reporter({ timeoutMs: 300 })(status('pending', 'hangs')), /timeout|aborted/i);
  });

  it('posts to the commit of the run with the link to its page', async () => {
    const before = calls.length;
    await reporter()(status('success', 'run-ok'));
    assert.deepEqual(calls.slice(before), [
      { url: `/repos/acme/app/statuses/${SHA}`, body: JSON.stringify({ state: 'success', context: 'switchyard/ci', description: 'success', target_url: 'http://ci.test/runs/#run=run-ok' }) },
    ]);
  });

  it('a pending status re-driven after the final one went out is not posted', async () => {
    const report = reporter();
    const before = calls.length;
    await report(status('failure', 'run-late'));
    await report(status('pending', 'run-late'));
    assert.deepEqual(calls.slice(before).map((call) => (JSON.parse(call.body) as { state: string }).state), ['failure']);
  });

  it('reports nothing for a run without a source, a repository not on GitHub or without a token, or a sha that is no commit id', async () => {
    const before = calls.length;
    await reporter({ source: null })(status('pending'));
    await reporter({ registration: null })(status('pending'));
    await reporter({ registration: { ...github, provider: 'local', path: '/srv/x' } })(status('pending'));
    await reporter({ registration: { ...github, token: null } })(status('pending'));
    await reporter({ source: source({ sha: 'HEAD' }) })(status('pending'));
    assert.equal(calls.length, before);
  });
});
