import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { LockTrigger, LockWorkflow } from '../../../machines/lock.types.ts';
import { createGitHubChanges } from '../../../src/lockfile/providers/github-changes.ts';
import { createLocalChanges } from '../../../src/lockfile/providers/local-changes.ts';
import { createLocalProvider } from '../../../src/lockfile/providers/local.ts';
import { changeQueryFor, withChangedFiles } from '../../../src/pipeline/changed-files.ts';
import { normalizeGitHubEvent } from '../../../src/pipeline/normalize.ts';
import { isDropped } from '../../../src/pipeline/normalized-event.ts';
import type { NormalizedEvent } from '../../../src/pipeline/normalized-event.ts';
import { TransientDeliveryError } from '../../../src/queue/delivery-queue.ts';
import { GitHubPeer } from '../../support/github-peer.ts';
import { createLockRepo, git } from '../../support/lock-repo.ts';
import * as gh from '../../unit/pipeline/github-payloads.ts';

const ZERO = '0'.repeat(40);
const A = 'a'.repeat(40);
const B = 'b'.repeat(40);

function normalized(eventName: string, payload: unknown): NormalizedEvent {
  const event = normalizeGitHubEvent(eventName, payload);
  assert.ok(!isDropped(event));
  return event;
}

const pushTo = (branch: string, overrides: Record<string, unknown>) => normalized('push', gh.push(`refs/heads/${branch}`, overrides));

function pullRequest(base: string, head: string): NormalizedEvent {
  const payload = gh.pullRequest('synchronize', { number: 12 });
  const pr = payload.pull_request;
  return normalized('pull_request', { ...payload, pull_request: { ...pr, base: { ...pr.base, sha: base }, head: { ...pr.head, sha: head } } });
}

const pathsWorkflow = (...triggers: LockTrigger[]): LockWorkflow => ({ name: 'docs', triggers, jobs: [] });
const pushPaths: LockTrigger = { _type: 'push', branches: [], paths: ['src/**'] };
const prPaths: LockTrigger = { _type: 'pr', events: [], targetBranches: [], sourceBranches: [], paths: ['src/**'] };

describe('which changes an event asks for (docs/lockfile.md#changed-files)', () => {
  it('a push lists what its commits added, modified and removed, once each', () => {
    const commits = [
      { id: A, added: ['src/new.ts'], modified: ['README.md'], removed: [] },
      { id: B, added: [], modified: ['README.md'], removed: ['old.txt'] },
    ];
    assert.deepEqual(changeQueryFor(pushTo('main', { before: A, after: B, commits })), { kind: 'listed', files: ['src/new.ts', 'README.md', 'old.txt'] });
  });

  it('a new branch, a forced push, no listed commit or a full list of 2,048 commits is compared instead', () => {
    const one = [{ id: B, added: ['x'], modified: [], removed: [] }];
    assert.deepEqual(changeQueryFor(pushTo('feature', { before: ZERO, after: B, created: true, commits: one })), { kind: 'range', base: null, head: B, listed: ['x'] });
    assert.deepEqual(changeQueryFor(pushTo('main', { before: A, after: B, forced: true, commits: one })), { kind: 'range', base: A, head: B, listed: ['x'] });
    assert.deepEqual(changeQueryFor(pushTo('main', { before: A, after: B, commits: [] })), { kind: 'range', base: A, head: B, listed: [] });
    const many = Array.from({ length: 2048 }, () => ({ id: B, added: [], modified: ['y'], removed: [] }));
    assert.deepEqual(changeQueryFor(pushTo('main', { before: A, after: B, commits: many })), { kind: 'range', base: A, head: B, listed: ['y'] });
  });

  it('a pull request asks for its own file list; other events have none', () => {
    assert.deepEqual(changeQueryFor(pullRequest(A, B)), { kind: 'pull', number: 12, base: A, head: B });
    assert.equal(changeQueryFor(normalized('push', gh.push('refs/tags/v1', { after: B }))), null, 'a tag push');
  });
});

describe('changed files from a git repository on disk', () => {
  let repo: Awaited<ReturnType<typeof createLockRepo>>;
  const sha: Record<string, string> = {};

  before(async () => {
    repo = await createLockRepo();
    sha['root'] = repo.commit({ 'README.md': 'hello', 'src/a.ts': 'a' }, 'root');
    git(repo.path, 'checkout', '-q', '-b', 'feature');
    sha['feature'] = repo.commit({ 'docs/guide.md': 'guide' }, 'docs only');
    git(repo.path, 'checkout', '-q', 'main');
    sha['main'] = repo.commit({ 'src/a.ts': 'a2' }, 'main moves on');
    git(repo.path, 'checkout', '-q', '-b', 'renamed', sha['root']);
    git(repo.path, 'mv', 'src/a.ts', 'src/b.ts');
    sha['renamed'] = repo.commit({}, 'rename');
    git(repo.path, 'checkout', '-q', 'main');
  });
  after(() => repo.remove());

  it('lists base...head from their merge base, a rename under both names', async () => {
    const changes = createLocalChanges(repo.path);
    assert.deepEqual(await changes.between({ base: sha['main'] ?? '', head: sha['feature'] ?? '' }), { files: ['docs/guide.md'] }, 'main moving on is not the branch\'s change');
    assert.deepEqual(await changes.between({ base: sha['root'] ?? '', head: sha['renamed'] ?? '' }), { files: ['src/a.ts', 'src/b.ts'] });
  });

  it('two histories with no commit in common (an orphan branch) differ by every file of their trees', async () => {
    git(repo.path, 'checkout', '-q', '--orphan', 'lonely');
    git(repo.path, 'rm', '-rq', '--cached', '.');
    git(repo.path, 'clean', '-fdq');
    const lonely = repo.commit({ 'site/index.html': '<p>' }, 'orphan');
    git(repo.path, 'checkout', '-q', '-f', 'main');
    assert.deepEqual(await createLocalChanges(repo.path).between({ base: sha['main'] ?? '', head: lonely }), { files: ['README.md', 'site/index.html', 'src/a.ts'] });
  });

  it('an unknown commit, a range that is not of commit ids or a missing repository is transient', async () => {
    const changes = createLocalChanges(repo.path);
    const unknown = await changes.between({ base: A, head: sha['main'] ?? '' });
    assert.ok('transient' in unknown && unknown.transient.includes(A), JSON.stringify(unknown));
    assert.ok('transient' in (await changes.between({ base: '--output=/tmp/x', head: sha['main'] ?? '' })));
    assert.ok('transient' in (await createLocalChanges('/nonexistent/repo').between({ base: A, head: B })));
  });

  describe('withChangedFiles over that repository', () => {
    const sources = () => ({ changes: createLocalChanges(repo.path), defaultBranchHead: () => createLocalProvider({ repository: 'acme/app', path: repo.path }).defaultBranchHead() });

    it('adds nothing when no trigger for this event type has paths', async () => {
      const event = pushTo('main', { before: A, after: B, forced: true });
      const plain = await withChangedFiles(event, [pathsWorkflow({ _type: 'push', branches: [], paths: [] }), pathsWorkflow(prPaths)], sources());
      assert.equal(plain, event.envelope, 'the same envelope, and git was never asked (the range is not in the repository)');
    });

    it('a push takes the files its commits list', async () => {
      const commits = [{ id: B, added: ['src/listed.ts'], modified: [], removed: [] }];
      const envelope = await withChangedFiles(pushTo('main', { before: A, after: B, commits }), [pathsWorkflow(pushPaths)], sources());
      assert.deepEqual(envelope.changedFiles, ['src/listed.ts']);
    });

    it('a new branch is compared with the default branch head; the default branch\'s own first push takes its commits', async () => {
      const created = await withChangedFiles(pushTo('feature', { before: ZERO, after: sha['feature'], created: true, commits: [] }), [pathsWorkflow(pushPaths)], sources());
      assert.deepEqual(created.changedFiles, ['docs/guide.md']);
      const commits = [{ id: sha['main'], added: ['README.md', 'src/a.ts'], modified: [], removed: [] }];
      const first = await withChangedFiles(pushTo('main', { before: ZERO, after: sha['main'], created: true, commits }), [pathsWorkflow(pushPaths)], sources());
      assert.deepEqual(first.changedFiles, ['README.md', 'src/a.ts']);
    });

    it('a forced push is compared from its merge base with the old head', async () => {
      const forced = await withChangedFiles(pushTo('main', { before: sha['feature'], after: sha['renamed'], forced: true }), [pathsWorkflow(pushPaths)], sources());
      assert.deepEqual(forced.changedFiles, ['src/a.ts', 'src/b.ts']);
    });

    it('a pull request lists base...head', async () => {
      const envelope = await withChangedFiles(pullRequest(sha['main'] ?? '', sha['feature'] ?? ''), [pathsWorkflow(prPaths)], sources());
      assert.deepEqual(envelope.changedFiles, ['docs/guide.md']);
    });

    it('files that cannot be listed are a transient delivery failure, never an empty list', async () => {
      await assert.rejects(withChangedFiles(pushTo('main', { before: A, after: B, forced: true }), [pathsWorkflow(pushPaths)], sources()), (error: unknown) => {
        assert.ok(error instanceof TransientDeliveryError);
        assert.match(error.message, /^changed files: listing the files changed in a{40}\.\.\.b{40}/);
        return true;
      });
    });
  });
});

describe('changed files from the GitHub REST API (a local peer)', () => {
  const peer = new GitHubPeer();
  const apiUrl = peer.forSuite();
  const changes = () => createGitHubChanges({ repository: 'acme/app', token: 'ghs_token', apiUrl: apiUrl(), timeoutMs: 300 });
  const json = (body: unknown) => ({ status: 200, body: JSON.stringify(body) });

  it('compares base...head with the token, a rename under both names', async () => {
    peer.answers.set(`/repos/acme/app/compare/${A}...${B}`, json({ commits: [], files: [{ filename: 'src/b.ts', status: 'renamed', previous_filename: 'src/a.ts' }, { filename: 'README.md', status: 'modified' }] }));
    assert.deepEqual(await changes().between({ base: A, head: B }), { files: ['src/b.ts', 'src/a.ts', 'README.md'] });
    assert.equal(peer.requests[0]?.headers.authorization, 'Bearer ghs_token');
  });

  it('reads every page of a pull request\'s files until a short one', async () => {
    const page = (from: number, count: number) => Array.from({ length: count }, (_, i) => ({ filename: `f/${from + i}.ts`, status: 'added' }));
    peer.answers.set('/repos/acme/app/pulls/12/files?per_page=100&page=1', json(page(0, 100)));
    peer.answers.set('/repos/acme/app/pulls/12/files?per_page=100&page=2', json(page(100, 3)));
    const listed = await changes().between({ base: A, head: B, pullRequest: 12 });
    assert.ok('files' in listed);
    assert.equal(listed.files.length, 103);
    assert.equal(listed.files.at(-1), 'f/102.ts');
    assert.equal(peer.requests.length, 2);
  });

  it('an error status, an answer without a file list or a refused connection is transient', async () => {
    peer.answers.set(`/repos/acme/app/compare/${A}...${B}`, { status: 502, body: JSON.stringify({ message: 'Bad Gateway' }) });
    assert.deepEqual(await changes().between({ base: A, head: B }), { transient: `GET /repos/acme/app/compare/${A}...${B} answered HTTP 502: Bad Gateway` });
    peer.answers.set(`/repos/acme/app/compare/${A}...${B}`, json({ message: 'no files here' }));
    assert.deepEqual(await changes().between({ base: A, head: B }), { transient: `GET /repos/acme/app/compare/${A}...${B} answered no file list` });
    const unknown = await changes().between({ base: A, head: B, pullRequest: 13 });
    assert.ok('transient' in unknown && unknown.transient.includes('HTTP 404'));
    const refused = await createGitHubChanges({ repository: 'acme/app', token: 't', apiUrl: 'http://127.0.0.1:1', timeoutMs: 300 }).between({ base: A, head: B });
    assert.ok('transient' in refused);
  });
});
