import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { GitObjectReader } from '../../../src/lockfile/providers/git-batch.ts';
import { git } from '../../support/lock-repo.ts';

describe('GitObjectReader: one git cat-file --batch per repository', () => {
  let work = '';
  let head = '';
  const LIMIT = 1024;

  before(() => {
    work = mkdtempSync(join(tmpdir(), 'switchyard-object-reader-'));
    git(work, 'init', '-q', '-b', 'main');
    for (let i = 0; i < 20; i++) writeFileSync(join(work, `file-${i}.txt`), `content of file ${i}\n`);
    writeFileSync(join(work, 'big.bin'), Buffer.alloc(LIMIT * 64, 7));
    writeFileSync(join(work, 'after-big.txt'), 'read after the big one\n');
    git(work, 'add', '-A');
    git(work, 'commit', '-q', '-m', 'objects');
    head = git(work, 'rev-parse', 'HEAD');
  });
  after(() => rmSync(work, { recursive: true, force: true }));

  it('answers concurrent reads in the order they were asked, each with its own content', async () => {
    const reader = new GitObjectReader(work, LIMIT);
    try {
      const answers = await Promise.all(Array.from({ length: 20 }, (_, i) => reader.read(`${head}:file-${i}.txt`)));
      answers.forEach((answer, i) => {
        assert.equal(answer.kind, 'object');
        assert.equal(answer.kind === 'object' && answer.content?.toString('utf8'), `content of file ${i}\n`);
      });
      const commit = await reader.read(`${head}^{commit}`);
      assert.deepEqual(commit.kind === 'object' && commit.type, 'commit');
    } finally {
      reader.close();
    }
  });

  it('skips an object over the limit without holding it, and the next answer is still right', async () => {
    const reader = new GitObjectReader(work, LIMIT);
    try {
      const [big, next, tree] = await Promise.all([reader.read(`${head}:big.bin`), reader.read(`${head}:after-big.txt`), reader.read(`${head}:`)]);
      assert.deepEqual(big, { kind: 'object', type: 'blob', size: LIMIT * 64, content: null });
      assert.equal(next.kind === 'object' && next.content?.toString('utf8'), 'read after the big one\n');
      assert.equal(tree.kind === 'object' && tree.type, 'tree');
    } finally {
      reader.close();
    }
  });

  it('tells a missing object, refuses a name with a line break, and starts git again after it died', async () => {
    const reader = new GitObjectReader(work, LIMIT);
    try {
      assert.deepEqual(await reader.read(`${head}:no-such-file`), { kind: 'missing' });
      assert.equal((await reader.read(`${head}:file-1.txt\n${head}:file-2.txt`)).kind, 'failed');
      const running = reader['current']?.child;
      assert.ok(running, 'a git process is running');
      // An idle reader's process does not hold the event loop open; this wait has to.
      const keepAlive = setInterval(() => undefined, 1000);
      running.kill('SIGKILL');
      await new Promise((resolve) => running.once('close', resolve));
      clearInterval(keepAlive);
      const again = await reader.read(`${head}:file-3.txt`);
      assert.equal(again.kind === 'object' && again.content?.toString('utf8'), 'content of file 3\n');
    } finally {
      reader.close();
    }
  });

  it('a path that is not a repository fails every read instead of hanging', async () => {
    const reader = new GitObjectReader(join(work, 'not-here'), LIMIT);
    const answer = await reader.read(`${head}^{commit}`);
    assert.equal(answer.kind, 'failed');
    reader.close();
  });
});
