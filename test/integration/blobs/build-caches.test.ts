import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import { it } from 'node:test';
import { PostgresBlobStore } from '../../../src/blobs/postgres-blob-store.ts';
import { urlSigningKey, UrlSigner } from '../../../src/blobs/signed-urls.ts';
import { UPLOAD_PATH, Uploads } from '../../../src/blobs/uploads.ts';
import { BuildCaches, KEPT_PER_KIND, type BuildCaller, type BuildUploadRequest } from '../../../src/caches/build-caches.ts';
import { describeEachKind, testLog, withTestDatabase } from '../../support/database.ts';

const sha = (bytes: Buffer) => createHash('sha256').update(bytes).digest('hex');
const CONTENT = 'c'.repeat(64);
const LOCK = 'd'.repeat(64);

function builder(extra: Partial<BuildCaller> = {}): BuildCaller {
  return {
    ...{ runId: 'run-1', jobKey: '__build__ci', dispatchId: `d-${Math.random()}`, agentId: 'a1', repository: 'acme/app', ref: 'main', defaultBranch: 'main', untrusted: false },
    ...{ contentHash: CONTENT, lockfileHash: LOCK, ...extra },
  };
}

async function withBuilds(kind: 'external' | 'embedded', fn: (builds: BuildCaches, upload: (who: BuildCaller, request: BuildUploadRequest, bytes: Buffer) => Promise<string>) => Promise<void>) {
  await withTestDatabase(kind, async ({ db }) => {
    let clock = 1_000;
    const now = () => clock;
    const store = new PostgresBlobStore(db, now);
    const uploads = new Uploads({ db, store, signer: new UrlSigner(urlSigningKey(Buffer.alloc(32, 3)), () => 'http://127.0.0.1:1', now), now, ttlMs: 60_000 });
    const builds = new BuildCaches({ db, uploads, now, log: testLog });
    /** Asks, uploads and completes, as the stock agent's build job does; the outcome, or why it was refused. */
    const upload = async (who: BuildCaller, request: BuildUploadRequest, bytes: Buffer) => {
      clock += 1;
      const offered = await builds.beginUpload(who, request);
      if ('refused' in offered) return `refused: ${offered.refused}`;
      assert.equal(await uploads.receive(new URL(offered.uploadUrl).pathname.slice(UPLOAD_PATH.length), Readable.from([bytes])), 'stored');
      return builds.completeUpload(who, request);
    };
    await fn(builds, upload);
  });
}

const source = (contentHash = CONTENT): BuildUploadRequest => ({ cacheType: 'source', contentHash, platform: 'linux', arch: 'x64' });
const deps = (bytes: Buffer, lockfileHash = LOCK): BuildUploadRequest => ({ cacheType: 'deps', lockfileHash, platform: 'linux', arch: 'x64', depsHash: sha(bytes) });
const query = (untrusted = false) => ({ repository: 'acme/app', untrusted, contentHash: CONTENT, lockfileHash: LOCK, platform: 'linux', arch: 'x64' });

await describeEachKind('build caches: who may upload what, and who reads it', (kind) => {
  it('only a build job uploads, and only the hashes its own lock file names', () =>
    withBuilds(kind, async (_builds, upload) => {
      assert.match(await upload(builder({ jobKey: 'test' }), source(), Buffer.from('x')), /^refused: job test is not a build job/);
      assert.match(await upload(builder(), source('e'.repeat(64)), Buffer.from('x')), /^refused: contentHash e+ is not the run's workflow contentHash/);
      assert.match(await upload(builder(), deps(Buffer.from('x'), 'f'.repeat(64)), Buffer.from('x')), /^refused: lockfileHash f+ is not the run's lock file lockfileHash/);
      assert.equal(await upload(builder(), source(), Buffer.from('source')), 'stored');
    }));

  it('a dependency tarball whose bytes do not hash to its depsHash is dropped; the right one is kept and served with its hash', () =>
    withBuilds(kind, async (builds, upload) => {
      const bytes = randomBytes(4096);
      assert.equal(await upload(builder(), { ...deps(bytes), depsHash: sha(Buffer.from('other')) }, bytes), 'hash mismatch');
      assert.equal(await builds.has(query(), 'deps'), false);
      assert.equal(await upload(builder(), deps(bytes), bytes), 'stored');
      const urls = await builds.urlsFor(query());
      assert.equal(urls.depsHash, sha(bytes));
      assert.ok(urls.depsUrl?.includes('/blobs/objects/builds%2F'));
      assert.equal(await upload(builder(), deps(bytes), bytes), 'exists', 'a second build of the same key keeps the first');
    }));

  it('cache poisoning: an untrusted build writes only where trusted runs never read', () =>
    withBuilds(kind, async (builds, upload) => {
      assert.equal(await upload(builder({ untrusted: true }), source(), Buffer.from('from a fork')), 'stored');
      assert.equal(await builds.has(query(false), 'source'), false, 'a trusted run does not see it');
      assert.equal(await builds.has(query(true), 'source'), true, 'untrusted runs do');
      assert.equal(await upload(builder(), source(), Buffer.from('trusted')), 'stored');
      assert.equal((await builds.urlsFor(query(true))).sourceTarHash, sha(Buffer.from('from a fork')), 'an untrusted run reads its own scope first');
      assert.equal((await builds.urlsFor(query(false))).sourceTarHash, sha(Buffer.from('trusted')));
    }));

  it(`each repository keeps the ${KEPT_PER_KIND} most recently used tarballs of a kind`, () =>
    withBuilds(kind, async (builds, upload) => {
      const hashes = Array.from({ length: KEPT_PER_KIND + 2 }, (_, i) => i.toString(16).padStart(64, '0'));
      for (const hash of hashes) assert.equal(await upload(builder({ contentHash: hash }), source(hash), Buffer.from(hash)), 'stored');
      const kept = await Promise.all(hashes.map((hash) => builds.has({ ...query(), contentHash: hash }, 'source')));
      assert.deepEqual(kept, hashes.map((_, i) => i >= 2), 'the two oldest went');
    }));
});
