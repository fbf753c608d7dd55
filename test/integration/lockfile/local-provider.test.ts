import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createLocalProvider } from '../../../src/lockfile/providers/local.ts';
import { MAX_LOCK_FILE_BYTES } from '../../../src/lockfile/parse.ts';
import type { LockFetchOutcome } from '../../../src/lockfile/providers/types.ts';
import { specExampleText } from '../../unit/lockfile/helpers.ts';

const LOCK = '.kici/kici.lock.json';

function git(cwd: string, ...args: string[]): string {
  return execFileSync('git', ['-c', 'user.name=Test', '-c', 'user.email=test@example.test', ...args], {
    cwd,
    encoding: 'utf8',
    env: { ...process.env, GIT_CONFIG_GLOBAL: '/dev/null', GIT_CONFIG_NOSYSTEM: '1' },
  }).trim();
}

/** Writes (or, with null, removes) `.kici/kici.lock.json` and commits; returns the commit id. */
function commit(work: string, message: string, lock: string | Buffer | null): string {
  rmSync(join(work, '.kici'), { recursive: true, force: true });
  if (lock !== null) {
    mkdirSync(join(work, '.kici'), { recursive: true });
    writeFileSync(join(work, LOCK), lock);
  }
  writeFileSync(join(work, 'README.md'), `${message}\n`);
  git(work, 'add', '-A');
  git(work, 'commit', '-q', '-m', message);
  return git(work, 'rev-parse', 'HEAD');
}

function kindOf(outcome: LockFetchOutcome): string {
  return outcome.kind;
}

describe('createLocalProvider against a real git repository', () => {
  let root = '';
  let work = '';
  let bare = '';
  const sha: Record<string, string> = {};

  before(() => {
    root = mkdtempSync(join(tmpdir(), 'switchyard-local-provider-'));
    work = join(root, 'work');
    mkdirSync(work);
    git(work, 'init', '-q', '-b', 'trunk');
    sha.none = commit(work, 'no lock file yet', null);
    sha.valid = commit(work, 'add the lock file', specExampleText());
    sha.corrupt = commit(work, 'break the lock file', '{"schemaVersion": 28}');
    sha.empty = commit(work, 'empty the lock file', '');
    sha.oversize = commit(work, 'grow the lock file', Buffer.alloc(MAX_LOCK_FILE_BYTES + 1, 0x20));
    rmSync(join(work, '.kici'), { recursive: true, force: true });
    mkdirSync(join(work, LOCK), { recursive: true });
    writeFileSync(join(work, LOCK, 'inside.txt'), 'a directory where the file should be\n');
    writeFileSync(join(work, 'README.md'), 'directory\n');
    git(work, 'add', '-A');
    git(work, 'commit', '-q', '-m', 'a directory at the lock file path');
    sha.directory = git(work, 'rev-parse', 'HEAD');
    sha.head = commit(work, 'restore the lock file', specExampleText());
    bare = join(root, 'mirror.git');
    git(root, 'clone', '-q', '--bare', work, bare);
  });

  after(() => rmSync(root, { recursive: true, force: true }));

  it('finds and validates the lock file at a commit, with its size', async () => {
    const provider = createLocalProvider({ repository: 'acme/app', path: work });
    assert.equal(provider.name, 'local:acme/app');
    const outcome = await provider.fetch({ sha: sha.valid! });
    assert.ok(outcome.kind === 'found', JSON.stringify(outcome));
    assert.equal(outcome.lock.workflows[0]?.name, 'ci');
    assert.equal(outcome.bytes, Buffer.byteLength(specExampleText()));
  });

  it('misses at a commit without the file', async () => {
    const outcome = await createLocalProvider({ repository: 'acme/app', path: work }).fetch({ sha: sha.none! });
    assert.deepEqual(outcome, { kind: 'miss', detail: `no ${LOCK} at ${sha.none} in ${work}` });
  });

  it('reports a corrupt, an empty and an oversized file as corrupt with the first problem', async () => {
    const provider = createLocalProvider({ repository: 'acme/app', path: work });
    const corrupt = await provider.fetch({ sha: sha.corrupt! });
    assert.ok(corrupt.kind === 'corrupt');
    assert.equal(corrupt.error.rule, 'schema_version');
    assert.equal(corrupt.error.path, '$.schemaVersion');
    const empty = await provider.fetch({ sha: sha.empty! });
    assert.ok(empty.kind === 'corrupt');
    assert.match(empty.error.problem, /empty/);
    const oversize = await provider.fetch({ sha: sha.oversize! });
    assert.ok(oversize.kind === 'corrupt');
    assert.equal(oversize.error.rule, 'file');
    assert.match(oversize.error.problem, new RegExp(`${MAX_LOCK_FILE_BYTES + 1} bytes, over the`));
  });

  it('reports a directory at the lock file path as corrupt, not as a miss', async () => {
    const outcome = await createLocalProvider({ repository: 'acme/app', path: work }).fetch({ sha: sha.directory! });
    assert.ok(outcome.kind === 'corrupt');
    assert.match(outcome.error.problem, /is a tree, not a file/);
  });

  it('reports a commit the repository does not have as absent (retried briefly), never as a miss (LOCK-2)', async () => {
    const unknown = 'f'.repeat(40);
    const outcome = await createLocalProvider({ repository: 'acme/app', path: work }).fetch({ sha: unknown });
    assert.deepEqual(outcome, { kind: 'absent', detail: `commit ${unknown} is not present in ${work}` });
  });

  it('refuses for good anything but a 40 or 64 digit hex commit id, so input never reaches git as an option', async () => {
    const provider = createLocalProvider({ repository: 'acme/app', path: work });
    const abbreviated = sha.valid!.slice(0, 10);
    for (const bad of ['--output=/tmp/pwned', '-', 'HEAD', 'abc12', abbreviated, 'main', `${'a'.repeat(40)}:README.md`, 'a'.repeat(65), 'g'.repeat(40)]) {
      const outcome = await provider.fetch({ sha: bad });
      assert.ok(outcome.kind === 'invalid', bad);
      assert.equal(outcome.detail, `${JSON.stringify(bad)} is not a commit id (40 or 64 hex digits)`);
    }
  });

  it('refuses for good a registered path that is relative or looks like an option, without running git', async () => {
    for (const path of ['../..', 'repo', '--upload-pack=touch /tmp/pwned', '/srv/../etc']) {
      const outcome = await createLocalProvider({ repository: 'acme/app', path }).fetch({ sha: sha.valid! });
      assert.ok(outcome.kind === 'invalid', path);
      assert.match(outcome.detail, /^the registered path of acme\/app must be a(n| normalized) absolute path/);
    }
  });

  it('reads a bare mirror the same way', async () => {
    const provider = createLocalProvider({ repository: 'acme/app', path: bare });
    const outcomes = await Promise.all(
      ['valid', 'none', 'corrupt'].map(async (name) => kindOf(await provider.fetch({ sha: sha[name]! }))),
    );
    assert.deepEqual(outcomes, ['found', 'miss', 'corrupt']);
  });

  it('finds the default branch from HEAD and reads its head commit for sha: null', async () => {
    const provider = createLocalProvider({ repository: 'acme/app', path: bare });
    assert.deepEqual(await provider.defaultBranchHead(), { sha: sha.head, branch: 'trunk' });
    assert.equal(kindOf(await provider.fetch({ sha: null })), 'found');
  });

  it('uses a configured default branch, and reports a missing one as transient', async () => {
    git(work, 'branch', 'release', sha.none!);
    const release = createLocalProvider({ repository: 'acme/app', path: work, defaultBranch: 'release' });
    assert.deepEqual(await release.defaultBranchHead(), { sha: sha.none, branch: 'release' });
    assert.equal(kindOf(await release.fetch({ sha: null })), 'miss');
    const missing = createLocalProvider({ repository: 'acme/app', path: work, defaultBranch: 'develop' });
    assert.deepEqual(await missing.defaultBranchHead(), { transient: `branch develop has no commit in ${work}` });
    assert.equal(kindOf(await missing.fetch({ sha: null })), 'transient');
  });

  it('treats a path that is not a repository as transient', async () => {
    const nowhere = join(root, 'does-not-exist');
    const provider = createLocalProvider({ repository: 'acme/app', path: nowhere });
    assert.equal(kindOf(await provider.fetch({ sha: sha.valid! })), 'transient');
    assert.ok('transient' in (await provider.defaultBranchHead()));
  });
});
