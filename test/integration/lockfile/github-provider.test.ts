import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createGitHubProvider } from '../../../src/lockfile/providers/github.ts';
import { createLocalProvider } from '../../../src/lockfile/providers/local.ts';
import { LockFileCache } from '../../../src/lockfile/cache.ts';
import { MAX_LOCK_FILE_BYTES } from '../../../src/lockfile/parse.ts';
import { resolveLockFile } from '../../../src/lockfile/resolve.ts';
import type { GitHubProviderOptions } from '../../../src/lockfile/providers/github.ts';
import { specExampleText } from '../../unit/lockfile/helpers.ts';
import { GitHubPeer } from '../../support/github-peer.ts';
import type { Answer } from '../../support/github-peer.ts';

const SHA = '0d1a26e67d8f5eaf1f6ba5c57fc3c7d91ac0fd1c';
const CONTENTS = '/repos/acme/app/contents/.kici/kici.lock.json';

const raw = (body: string | Buffer): Answer => ({ status: 200, body, contentType: 'application/vnd.github.raw' });
const message = (status: number, text: string): Answer => ({ status, body: JSON.stringify({ message: text }) });

describe('createGitHubProvider against a local GitHub peer', () => {
  const peer = new GitHubPeer();
  const apiUrl = peer.forSuite();
  const provider = (options: Partial<GitHubProviderOptions> = {}) =>
    createGitHubProvider({ repository: 'acme/app', token: 'ghs_installation', apiUrl: apiUrl(), timeoutMs: 300, ...options });

  it('reads the raw file at ?ref=<sha> with the installation token and the raw media type', async () => {
    peer.answers.set(`${CONTENTS}?ref=${SHA}`, raw(specExampleText()));
    const outcome = await provider().fetch({ sha: SHA });
    assert.ok(outcome.kind === 'found', JSON.stringify(outcome));
    assert.equal(outcome.lock.workflows[0]?.name, 'ci');
    assert.equal(outcome.bytes, Buffer.byteLength(specExampleText()));
    const [request] = peer.requests;
    assert.equal(request?.headers.authorization, 'Bearer ghs_installation');
    assert.equal(request?.headers.accept, 'application/vnd.github.raw+json');
    assert.equal(provider().name, 'github:acme/app');
  });

  it('decodes the base64 content of a JSON answer', async () => {
    const content = Buffer.from(specExampleText()).toString('base64').replace(/(.{60})/g, '$1\n');
    const body = JSON.stringify({ type: 'file', encoding: 'base64', size: 10, path: '.kici/kici.lock.json', content });
    peer.answers.set(`${CONTENTS}?ref=${SHA}`, { status: 200, body });
    assert.equal((await provider().fetch({ sha: SHA })).kind, 'found');
  });

  it('mints the token per request from a function, and a failing one is transient', async () => {
    peer.answers.set(`${CONTENTS}?ref=${SHA}`, raw(specExampleText()));
    const minted = provider({ token: () => Promise.resolve('ghs_minted') });
    assert.equal((await minted.fetch({ sha: SHA })).kind, 'found');
    assert.equal(peer.requests[0]?.headers.authorization, 'Bearer ghs_minted');
    const broken = provider({ token: () => Promise.reject(new Error('app key rejected')) });
    assert.deepEqual(await broken.fetch({ sha: SHA }), {
      kind: 'transient',
      detail: 'no GitHub credentials: app key rejected',
    });
  });

  it('misses on 404 for the file', async () => {
    const outcome = await provider().fetch({ sha: SHA });
    assert.deepEqual(outcome, { kind: 'miss', detail: 'no .kici/kici.lock.json (Not Found)' });
  });

  it('treats a 404 for an unknown commit as absent (retried briefly), never as a miss', async () => {
    peer.answers.set(`${CONTENTS}?ref=${SHA}`, message(404, `No commit found for the ref ${SHA}`));
    const outcome = await provider().fetch({ sha: SHA });
    assert.ok(outcome.kind === 'absent');
    assert.match(outcome.detail, /HTTP 404: No commit found for the ref/);
  });

  for (const [status, text] of [
    [500, 'Server Error'],
    [502, 'Bad Gateway'],
    [503, 'Service Unavailable'],
    [429, 'API rate limit exceeded'],
    [401, 'Bad credentials'],
    [403, 'Resource not accessible by integration'],
    [422, 'Unprocessable'],
  ] as const) {
    it(`treats HTTP ${status} as transient with its status (LOCK-2)`, async () => {
      peer.answers.set(`${CONTENTS}?ref=${SHA}`, message(status, text));
      assert.deepEqual(await provider().fetch({ sha: SHA }), {
        kind: 'transient',
        detail: `GET ${CONTENTS}?ref=${SHA} answered HTTP ${status}: ${text}`,
      });
    });
  }

  it('reports empty and invalid content as corrupt through the parser', async () => {
    peer.answers.set(`${CONTENTS}?ref=${SHA}`, raw(''));
    const empty = await provider().fetch({ sha: SHA });
    assert.ok(empty.kind === 'corrupt');
    assert.deepEqual([empty.error.rule, empty.error.problem], ['file', 'lock file is empty']);
    peer.answers.set(`${CONTENTS}?ref=${SHA}`, raw('{"schemaVersion": 29, "workflows": ['));
    const invalid = await provider().fetch({ sha: SHA });
    assert.ok(invalid.kind === 'corrupt');
    assert.match(invalid.error.problem, /not valid JSON/);
  });

  it('stops reading past 5 MiB and reports the file as corrupt', async () => {
    peer.answers.set(`${CONTENTS}?ref=${SHA}`, raw(Buffer.alloc(MAX_LOCK_FILE_BYTES + 1, 0x20)));
    // 5 MiB over loopback can take longer than the 300 ms the other cases allow on a loaded machine: that would be a timeout, not this limit.
    const outcome = await provider({ timeoutMs: 10_000 }).fetch({ sha: SHA });
    assert.ok(outcome.kind === 'corrupt', JSON.stringify(outcome));
    assert.equal(outcome.error.rule, 'file');
    assert.match(outcome.error.problem, /more than 5242880 bytes, over the 5242880-byte \(5 MiB\) limit/);
  });

  it('times out a slow answer and a stalled body as transient', async () => {
    peer.answers.set(`${CONTENTS}?ref=${SHA}`, { ...raw(specExampleText()), delayMs: 1_000 });
    assert.deepEqual(await provider({ timeoutMs: 100 }).fetch({ sha: SHA }), {
      kind: 'transient',
      detail: `GET ${CONTENTS}?ref=${SHA} timed out after 100 ms`,
    });
    peer.answers.set(`${CONTENTS}?ref=${SHA}`, { ...raw(''), stallBody: true });
    const stalled = await provider({ timeoutMs: 100 }).fetch({ sha: SHA });
    assert.ok(stalled.kind === 'transient');
    assert.match(stalled.detail, /timed out after 100 ms/);
  });

  it('treats a refused connection as transient', async () => {
    const gone = new GitHubPeer();
    const goneUrl = await gone.start();
    await gone.stop();
    const outcome = await provider({ apiUrl: goneUrl }).fetch({ sha: SHA });
    assert.ok(outcome.kind === 'transient');
    assert.match(outcome.detail, /failed: fetch failed \(.*ECONNREFUSED/);
  });

  it('refuses for good (invalid) a malformed commit id or repository, without a request', async () => {
    const outcome = await provider().fetch({ sha: '../../../user' });
    assert.ok(outcome.kind === 'invalid');
    assert.match(outcome.detail, /is not a commit id/);
    const badRepo = createGitHubProvider({ repository: 'acme/../x', token: 't', apiUrl: apiUrl() });
    assert.equal((await badRepo.fetch({ sha: SHA })).kind, 'invalid');
    assert.ok('transient' in (await badRepo.defaultBranchHead()));
    assert.equal(peer.requests.length, 0);
  });

  it('reads at the default branch without ?ref for sha: null', async () => {
    peer.answers.set(CONTENTS, raw(specExampleText()));
    assert.equal((await provider().fetch({ sha: null })).kind, 'found');
  });

  it('finds the default branch head through the repository and the commit', async () => {
    const repository = { full_name: 'acme/app', default_branch: 'release/1.x' };
    peer.answers.set('/repos/acme/app', { status: 200, body: JSON.stringify(repository) });
    peer.answers.set('/repos/acme/app/commits/release/1.x', { status: 200, body: JSON.stringify({ sha: SHA }) });
    assert.deepEqual(await provider().defaultBranchHead(), { sha: SHA, branch: 'release/1.x' });
    assert.equal(peer.requests[0]?.headers.accept, 'application/vnd.github+json');
  });

  it('reports a failing repository or commit lookup as transient', async () => {
    peer.answers.set('/repos/acme/app', message(502, 'Bad Gateway'));
    assert.deepEqual(await provider().defaultBranchHead(), {
      transient: 'GET /repos/acme/app answered HTTP 502: Bad Gateway',
    });
    peer.answers.set('/repos/acme/app', { status: 200, body: JSON.stringify({ default_branch: 'main' }) });
    peer.answers.set('/repos/acme/app/commits/main', message(429, 'API rate limit exceeded'));
    assert.deepEqual(await provider().defaultBranchHead(), {
      transient: 'GET /repos/acme/app/commits/main answered HTTP 429: API rate limit exceeded',
    });
  });
});

describe('resolveLockFile across a GitHub peer and a local mirror (LOCK-3)', () => {
  const peer = new GitHubPeer();
  let apiUrl = '';
  let root = '';
  let sha = '';

  before(async () => {
    apiUrl = await peer.start();
    root = mkdtempSync(join(tmpdir(), 'switchyard-resolve-'));
    const run = (...args: string[]) =>
      execFileSync('git', ['-c', 'user.name=T', '-c', 'user.email=t@example.test', ...args], { cwd: root, encoding: 'utf8' }).trim();
    run('init', '-q', '-b', 'main');
    mkdirSync(join(root, '.kici'));
    writeFileSync(join(root, '.kici/kici.lock.json'), specExampleText());
    run('add', '-A');
    run('commit', '-q', '-m', 'lock file');
    sha = run('rev-parse', 'HEAD');
  });
  after(async () => {
    await peer.stop();
    rmSync(root, { recursive: true, force: true });
  });

  const candidates = () => [
    {
      provider: createGitHubProvider({ repository: 'acme/app', token: 't', apiUrl, timeoutMs: 300 }),
      cloneUrl: 'https://github.com/acme/app.git',
    },
    { provider: createLocalProvider({ repository: 'acme/app', path: root }), cloneUrl: root },
  ];

  it('takes a valid fallback over a corrupt inbound file, with the fallback clone URL', async () => {
    peer.answers.set(`${CONTENTS}?ref=${sha}`, raw('{"schemaVersion": 28}'));
    const result = await resolveLockFile({ candidates: candidates(), sha, cache: new LockFileCache() });
    assert.ok(result.kind === 'found');
    assert.deepEqual([result.provider, result.cloneUrl, result.sha], ['local:acme/app', root, sha]);
  });

  it('is transient when the inbound source is down and the fallback has no such commit', async () => {
    peer.answers.set(`${CONTENTS}?ref=${'a'.repeat(40)}`, message(503, 'Service Unavailable'));
    const result = await resolveLockFile({ candidates: candidates(), sha: 'a'.repeat(40), cache: new LockFileCache() });
    assert.ok(result.kind === 'transient');
    assert.match(result.detail, /^github:acme\/app: .*HTTP 503.*; local:acme\/app: commit a{40} is not present/);
  });
});
