import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import { buffer } from 'node:stream/consumers';
import { describe, it } from 'node:test';
import { BlobTooLargeError, type BlobStore } from '../../../src/blobs/blob-store.ts';
import { FileBlobStore } from '../../../src/blobs/file-blob-store.ts';
import { CHUNK_BYTES, PostgresBlobStore } from '../../../src/blobs/postgres-blob-store.ts';
import { describeEachKind, tempDir, withTestDatabase } from '../../support/database.ts';

const sha = (bytes: Buffer) => createHash('sha256').update(bytes).digest('hex');
/** `bytes` as a stream of small pieces, as a socket delivers an upload. */
const streamOf = (bytes: Buffer, piece = 64 * 1024) => Readable.from((function* () {
  for (let at = 0; at < bytes.length; at += piece) yield bytes.subarray(at, at + piece);
})());

/** The one contract every adapter keeps (DESIGN.md §7). */
function contract(open: (run: (store: BlobStore) => Promise<void>) => Promise<void>): void {
  it('a staged object is invisible until committed; then it reads back whole, with its size and hash', () =>
    open(async (store) => {
      const bytes = randomBytes(CHUNK_BYTES * 2 + 12_345);
      const staged = await store.stage(streamOf(bytes), 10 * CHUNK_BYTES);
      assert.deepEqual([staged.sizeBytes, staged.sha256], [bytes.length, sha(bytes)]);
      assert.equal(await store.get('caches/a'), null);
      assert.deepEqual(await store.list(''), []);
      assert.equal(await store.commit(staged.stagingId, 'caches/a'), true);
      const read = await store.get('caches/a');
      assert.ok(read);
      assert.equal(read.sizeBytes, bytes.length);
      assert.ok((await buffer(read.body)).equals(bytes));
    }));

  it('a commit replaces what was under the key; a staging id commits once', () =>
    open(async (store) => {
      const first = await store.stage(streamOf(Buffer.from('one')), 100);
      const second = await store.stage(streamOf(Buffer.from('two')), 100);
      assert.equal(await store.commit(first.stagingId, 'k/x'), true);
      assert.equal(await store.commit(second.stagingId, 'k/x'), true);
      assert.equal(await store.commit(second.stagingId, 'k/y'), false, 'taken already');
      const read = await store.get('k/x');
      assert.equal((await buffer(read?.body ?? Readable.from([]))).toString(), 'two');
      assert.deepEqual(await store.list('k/'), [{ key: 'k/x', sizeBytes: 3 }]);
    }));

  it('an upload past its cap fails with BlobTooLargeError and leaves nothing behind', () =>
    open(async (store) => {
      await assert.rejects(store.stage(streamOf(randomBytes(5000), 1000), 4096), BlobTooLargeError);
      assert.equal(await store.sweepStaging(Date.now() + 60_000), 0, 'no staging object was kept');
    }));

  it('list by prefix in key order, delete, discard, and sweep of staging left by uploads never completed', () =>
    open(async (store) => {
      for (const key of ['p/b', 'p/a/1', 'q/c']) await store.commit((await store.stage(streamOf(Buffer.from(key)), 100)).stagingId, key);
      assert.deepEqual((await store.list('p/')).map((entry) => entry.key), ['p/a/1', 'p/b']);
      await store.delete('p/b');
      assert.equal(await store.get('p/b'), null);
      const discarded = await store.stage(streamOf(Buffer.from('gone')), 100);
      await store.discard(discarded.stagingId);
      assert.equal(await store.commit(discarded.stagingId, 'p/gone'), false);
      await store.stage(streamOf(Buffer.from('abandoned')), 100);
      assert.equal(await store.sweepStaging(Date.now() - 60_000), 0, 'a fresh one stays');
      assert.equal(await store.sweepStaging(Date.now() + 60_000), 1);
    }));

  it('refuses keys that are not plain paths', () =>
    open(async (store) => {
      const staged = await store.stage(streamOf(Buffer.from('x')), 100);
      for (const key of ['../escape', '/abs', 'a//b', 'a/../b', '', 'sp ace']) await assert.rejects(store.commit(staged.stagingId, key), RangeError, key);
      await assert.rejects(store.get('../etc/passwd'), RangeError);
    }));
}

describe('blob store: files in the data directory', () => {
  contract(async (run) => run(new FileBlobStore(await tempDir('sy-blobs-'))));
});

await describeEachKind('blob store: Postgres, chunked', (kind) => {
  contract((run) => withTestDatabase(kind, ({ db }) => run(new PostgresBlobStore(db, Date.now))));
});
