import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import { it } from 'node:test';
import { PostgresBlobStore } from '../../../src/blobs/postgres-blob-store.ts';
import { urlSigningKey, UrlSigner } from '../../../src/blobs/signed-urls.ts';
import { UPLOAD_PATH, Uploads } from '../../../src/blobs/uploads.ts';
import { UserCaches, scopesOf, type CacheCaller } from '../../../src/caches/user-cache.ts';
import { describeEachKind, testLog, withTestDatabase } from '../../support/database.ts';

const sha = (bytes: Buffer) => createHash('sha256').update(bytes).digest('hex');

function caller(ref: string, extra: Partial<CacheCaller> = {}): CacheCaller {
  return { runId: `run-${ref}`, jobKey: 'build', dispatchId: `d-${ref}-${Math.random()}`, agentId: 'a1', repository: 'acme/app', ref, defaultBranch: 'main', untrusted: false, ...extra };
}

/** User caches over a real database and blob store; `clock.now` moves by hand so recency is exact. */
interface CacheBench {
  caches: UserCaches;
  uploads: Uploads;
  /** Asks, uploads and completes, as the agent does; returns the outcome (or `skip`). */
  save: (who: CacheCaller, key: string, bytes: Buffer) => Promise<string>;
  clock: { now: number };
}

async function withCaches(kind: 'external' | 'embedded', quotaBytes: number, fn: (bench: CacheBench) => Promise<void>) {
  await withTestDatabase(kind, async ({ db }) => {
    const clock = { now: 1_000 };
    const now = () => clock.now;
    const store = new PostgresBlobStore(db, now);
    const signer = new UrlSigner(urlSigningKey(Buffer.alloc(32, 1)), () => 'http://127.0.0.1:1', now);
    const uploads = new Uploads({ db, store, signer, now, ttlMs: 60_000 });
    const caches = new UserCaches({ db, uploads, now, limits: { quotaBytes, maxEntryBytes: 1 << 20 }, log: testLog });
    const save = async (who: CacheCaller, key: string, bytes: Buffer) => {
      clock.now += 1;
      const offered = await caches.beginSave(who, key);
      if (offered.skip) return 'skip';
      const uploadId = new URL(offered.uploadUrl).pathname.slice(UPLOAD_PATH.length);
      assert.equal(await uploads.receive(uploadId, Readable.from([bytes])), 'stored');
      return caches.completeSave(who, key, sha(bytes), bytes.length);
    };
    await fn({ caches, uploads, save, clock });
  });
}

await describeEachKind('user caches: scopes, restore order, quota', (kind) => {
  it('a run reads its own branch, then the default branch; never another branch', () =>
    withCaches(kind, 1 << 30, async ({ caches, save }) => {
      assert.equal(await save(caller('main'), 'deps-1', Buffer.from('main bytes')), 'saved');
      assert.equal(await save(caller('feature'), 'deps-1', Buffer.from('feature bytes')), 'saved', 'the same key in another scope');
      assert.equal(await save(caller('other'), 'only-other', Buffer.from('x')), 'saved');
      const onFeature = await caches.restore(caller('feature'), 'deps-1', []);
      assert.ok(onFeature.hit && onFeature.tarHash === sha(Buffer.from('feature bytes')), 'its own branch first');
      const onFix = await caches.restore(caller('fix'), 'deps-1', []);
      assert.ok(onFix.hit && onFix.tarHash === sha(Buffer.from('main bytes')), 'then the default branch');
      assert.deepEqual(await caches.restore(caller('fix'), 'only-other', []), { hit: false }, 'another branch is not read');
      assert.equal(await save(caller('main'), 'deps-1', Buffer.from('again')), 'skip', 'a key is immutable');
    }));

  it('restore keys are prefixes tried in order after the exact key; the newest entry of a prefix wins', () =>
    withCaches(kind, 1 << 30, async ({ caches, save }) => {
      await save(caller('main'), 'npm-linux-aaa', Buffer.from('old'));
      await save(caller('main'), 'npm-linux-bbb', Buffer.from('new'));
      await save(caller('main'), 'yarn-linux-ccc', Buffer.from('yarn'));
      const byPrefix = await caches.restore(caller('main'), 'npm-linux-zzz', ['npm-linux-', 'yarn-']);
      assert.ok(byPrefix.hit);
      assert.equal(byPrefix.matchedKey, 'npm-linux-bbb');
      const second = await caches.restore(caller('main'), 'npm-mac-zzz', ['npm-mac-', 'yarn-']);
      assert.ok(second.hit && second.matchedKey === 'yarn-linux-ccc', 'the second prefix once the first finds nothing');
      const exact = await caches.restore(caller('main'), 'npm-linux-aaa', ['npm-linux-']);
      assert.ok(exact.hit && exact.matchedKey === 'npm-linux-aaa', 'an exact key beats a newer prefix match');
    }));

  it('cache poisoning: a fork pull request restores trusted entries but what it saves is read by no trusted run', () =>
    withCaches(kind, 1 << 30, async ({ caches, save }) => {
      await save(caller('main'), 'deps', Buffer.from('trusted'));
      const fork = caller('main', { untrusted: true, runId: 'fork-run' });
      const read = await caches.restore(fork, 'deps', []);
      assert.ok(read.hit && read.tarHash === sha(Buffer.from('trusted')), 'the fork reads the default branch');
      assert.equal(await save(fork, 'poison', Buffer.from('evil')), 'saved', 'the fork may keep its own entry');
      assert.deepEqual(scopesOf(fork).write, 'untrusted:main');
      assert.deepEqual(await caches.restore(caller('main'), 'poison', []), { hit: false }, 'a trusted run on the same branch never reads it');
      assert.deepEqual(await caches.restore(caller('main'), 'zzz', ['poi']), { hit: false }, 'nor by prefix');
      const again = await caches.restore({ ...fork, runId: 'fork-run-2' }, 'poison', []);
      assert.ok(again.hit, 'the next fork run of that branch does');
    }));

  it('a completion whose hash or size differs from the bytes that came is dropped; the key stays free', () =>
    withCaches(kind, 1 << 30, async ({ caches, uploads, clock }) => {
      const who = caller('main');
      const bytes = randomBytes(2048);
      const offered = await caches.beginSave(who, 'k');
      assert.ok(!offered.skip);
      await uploads.receive(new URL(offered.uploadUrl).pathname.slice(UPLOAD_PATH.length), Readable.from([bytes]));
      clock.now += 1;
      assert.equal(await caches.completeSave(who, 'k', sha(Buffer.from('other')), bytes.length), 'hash or size mismatch');
      assert.equal(await caches.completeSave(who, 'k', sha(bytes), bytes.length), 'no upload', 'the upload was taken by the failed completion');
      assert.deepEqual(await caches.restore(who, 'k', []), { hit: false });
      assert.equal((await caches.beginSave(who, 'k')).skip, false, 'offered again');
      assert.equal(await caches.completeSave(caller('main'), 'never-asked', sha(bytes), bytes.length), 'no upload');
    }));

  it('past the quota the least recently used entries go, not the newest', () =>
    withCaches(kind, 10_000, async ({ caches, save, clock }) => {
      for (const key of ['a', 'b', 'c']) assert.equal(await save(caller('main'), key, randomBytes(3_000)), 'saved');
      clock.now += 1;
      assert.ok((await caches.restore(caller('main'), 'a', [])).hit, 'a is used: b is now the least recently used');
      assert.equal(await save(caller('main'), 'd', randomBytes(3_000)), 'saved');
      const hits = await Promise.all(['a', 'b', 'c', 'd'].map(async (key) => (await caches.restore(caller('main'), key, [])).hit));
      assert.deepEqual(hits, [true, false, true, true]);
    }));
});
