import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import type { Kysely } from 'kysely';
import { pino } from 'pino';
import { getRepository } from '../../../src/db/repositories.ts';
import type { Schema } from '../../../src/db/schema.ts';
import { registerSourceRoutes } from '../../../src/http/api-sources.ts';
import { Router } from '../../../src/http/router.ts';
import { createHttpServer, listen } from '../../../src/http/server.ts';
import { skipReason, tempDir, withTestDatabase } from '../../support/database.ts';
import { createLockRepo } from '../../support/lock-repo.ts';

const token = `sya_${randomBytes(16).toString('hex')}`;

/** The source routes on a real HTTP server; `records` holds what the server logged. */
async function serve(db: Kysely<Schema>) {
  const router = new Router();
  registerSourceRoutes(router, { db, now: Date.now, onRequeued: () => {} });
  const records: Record<string, unknown>[] = [];
  const log = pino({ level: 'info' }, { write: (line: string) => records.push(JSON.parse(line) as Record<string, unknown>) });
  const server = createHttpServer({ router, adminTokenHash: createHash('sha256').update(token).digest(), log });
  const port = await listen(server, 0, '127.0.0.1');
  const register = async (body: object) => {
    const res = await fetch(`http://127.0.0.1:${port}/api/v1/repositories`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    return { status: res.status, body: (await res.json()) as { error?: string; reason?: string } };
  };
  const close = () => new Promise((resolve) => server.close(resolve));
  return { register, records, close };
}

const local = (path: string, extra: object = {}) => ({ name: 'acme/app', provider: 'local', path, ...extra });

describe('POST /api/v1/repositories checks a local path before storing it', { skip: await skipReason('external') }, () => {
  it('refuses relative, option-looking, missing and non-repository paths with 400 and the reason, and logs it', async () => {
    await withTestDatabase('external', async ({ db }) => {
      const http = await serve(db);
      const scratch = await tempDir();
      await writeFile(join(scratch, 'file.txt'), 'not a directory\n');
      const repo = await createLockRepo();
      repo.commit({ 'src/a.txt': 'a' });
      try {
        const cases: [string, RegExp][] = [
          ['../..', /^path: must be an absolute path, got "\.\.\/\.\."$/],
          ['--upload-pack=touch /tmp/pwned', /^path: must be an absolute path, got "--upload-pack=touch \/tmp\/pwned"$/],
          ['/srv/../etc', /^path: must be a normalized absolute path/],
          ['/etc', /^path: \/etc is not a git repository$/],
          [join(scratch, 'missing'), /^path: \/.*\/missing does not exist$/],
          [join(scratch, 'file.txt'), /^path: \/.*\/file\.txt is not a directory$/],
          [join(repo.path, 'src'), /^path: \/.*\/src is inside the git repository \/.*; register its top directory$/],
        ];
        for (const [path, reason] of cases) {
          const answer = await http.register(local(path));
          assert.equal(answer.status, 400, path);
          assert.equal(answer.body.error, 'invalid request');
          assert.match(answer.body.reason ?? '', reason);
          const logged = http.records.find((r) => r['msg'] === 'request refused' && r['reason'] === answer.body.reason);
          assert.ok(logged, `the refusal of ${path} is logged`);
        }
        assert.equal(await getRepository(db, 'acme/app'), null, 'nothing was stored');
      } finally {
        repo.remove();
        await http.close();
      }
    });
  });

  it('refuses an option-looking default branch or clone URL', async () => {
    await withTestDatabase('external', async ({ db }) => {
      const http = await serve(db);
      const repo = await createLockRepo();
      try {
        for (const defaultBranch of ['--orphan', 'a..b', 'main branch', 'x@{1}']) {
          const answer = await http.register(local(repo.path, { defaultBranch }));
          assert.equal(answer.status, 400, defaultBranch);
          assert.match(answer.body.reason ?? '', /^defaultBranch: must be a branch name/);
        }
        const answer = await http.register(local(repo.path, { cloneUrl: '--upload-pack=evil' }));
        assert.equal(answer.status, 400);
        assert.match(answer.body.reason ?? '', /^cloneUrl: must be a URL/);
      } finally {
        repo.remove();
        await http.close();
      }
    });
  });

  it('registers the top of a work tree and a bare repository', async () => {
    await withTestDatabase('external', async ({ db }) => {
      const http = await serve(db);
      const repo = await createLockRepo();
      repo.commit({ 'README.md': 'hi' });
      const bare = join(await tempDir(), 'mirror.git');
      await mkdir(bare);
      execFileSync('git', ['init', '-q', '--bare', bare]);
      try {
        assert.equal((await http.register(local(repo.path, { defaultBranch: 'release/1.x' }))).status, 201);
        assert.equal((await getRepository(db, 'acme/app'))?.path, repo.path);
        assert.equal((await http.register({ name: 'acme/mirror', provider: 'local', path: bare })).status, 201);
      } finally {
        repo.remove();
        await http.close();
      }
    });
  });
});
