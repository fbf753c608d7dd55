import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { LockFileCache, TtlLru } from '../../../src/lockfile/cache.ts';
import { LockFileParseError } from '../../../src/lockfile/errors.ts';
import { parseLockFile } from '../../../src/lockfile/parse.ts';
import type { CachedLock } from '../../../src/lockfile/cache.ts';
import { specExampleText } from './helpers.ts';

const HOUR = 60 * 60 * 1000;
const SHA = '0d1a26e67d8f5eaf1f6ba5c57fc3c7d91ac0fd1c';

function found(): CachedLock {
  const parsed = parseLockFile(specExampleText());
  assert.ok(parsed.ok);
  return { kind: 'found', lock: parsed.lock, bytes: 1234 };
}

function clock(start = 1_000_000): { now: () => number; advance: (ms: number) => void } {
  let time = start;
  return { now: () => time, advance: (ms) => (time += ms) };
}

describe('LockFileCache (LOCK-5)', () => {
  it('stores a found lock file under provider:repository:sha and counts hits and misses', () => {
    const cache = new LockFileCache({ now: clock().now });
    const lock = found();
    assert.equal(cache.get('github:acme/app', SHA), undefined);
    assert.equal(cache.set('github:acme/app', SHA, lock), true);
    assert.equal(cache.get('github:acme/app', SHA), lock);
    assert.equal(cache.get('local:acme/app', SHA), undefined, 'another provider is another key');
    assert.equal(cache.get('github:acme/other', SHA), undefined, 'another repository is another key');
    assert.equal(LockFileCache.key('github:acme/app', SHA.toUpperCase()), `github:acme/app:${SHA}`);
    assert.deepEqual({ hits: cache.hits, misses: cache.misses, size: cache.size }, { hits: 1, misses: 3, size: 1 });
  });

  it('never stores a miss, a corrupt file or a transient error', () => {
    const cache = new LockFileCache({ now: clock().now });
    const error = new LockFileParseError('$', 'lock file is empty', 'file');
    assert.equal(cache.set('github:acme/app', 'a'.repeat(40), { kind: 'miss', detail: 'no file' }), false);
    assert.equal(cache.set('github:acme/app', 'b'.repeat(40), { kind: 'corrupt', error }), false);
    assert.equal(cache.set('github:acme/app', 'c'.repeat(40), { kind: 'transient', detail: 'HTTP 503' }), false);
    assert.equal(cache.size, 0);
  });

  it('reads a commit once however many deliveries ask for it at the same time, and reads again after an outcome it does not keep', async () => {
    const cache = new LockFileCache({ now: clock().now });
    const lock = found();
    let fetches = 0;
    let answer: (outcome: CachedLock) => void = () => undefined;
    const fetch = () => {
      fetches += 1;
      return new Promise<CachedLock>((resolve) => (answer = resolve));
    };
    const reads = [cache.read('local:acme/app', SHA, fetch), cache.read('local:acme/app', SHA, fetch), cache.read('local:acme/app', SHA, fetch)];
    answer(lock);
    assert.deepEqual(await Promise.all(reads), [lock, lock, lock]);
    assert.equal(await cache.read('local:acme/app', SHA, fetch), lock);
    assert.equal(fetches, 1);
    assert.deepEqual({ hits: cache.hits, misses: cache.misses }, { hits: 3, misses: 1 }, 'a read that joined one in flight is a hit');

    const other = 'e'.repeat(40);
    const transient = () => {
      fetches += 1;
      return Promise.resolve({ kind: 'transient' as const, detail: 'HTTP 503' });
    };
    assert.deepEqual(await Promise.all([cache.read('local:acme/app', other, transient), cache.read('local:acme/app', other, transient)]), [
      { kind: 'transient', detail: 'HTTP 503' },
      { kind: 'transient', detail: 'HTTP 503' },
    ]);
    await cache.read('local:acme/app', other, transient);
    assert.equal(fetches, 3, 'shared while in flight, fetched again once it was not kept');
  });

  it('expires an entry one hour after it was stored', () => {
    const time = clock();
    const cache = new LockFileCache({ now: time.now });
    cache.set('github:acme/app', SHA, found());
    time.advance(HOUR - 1);
    assert.ok(cache.get('github:acme/app', SHA), 'still there just before the hour');
    time.advance(1);
    assert.equal(cache.get('github:acme/app', SHA), undefined);
    assert.equal(cache.size, 0, 'the expired entry is dropped');
  });

  it('keeps 500 entries and evicts the least recently used', () => {
    const cache = new LockFileCache({ now: clock().now });
    const lock = found();
    const sha = (n: number) => n.toString(16).padStart(40, '0');
    for (let n = 0; n < 500; n += 1) cache.set('github:acme/app', sha(n), lock);
    assert.ok(cache.get('github:acme/app', sha(0)), 'reading the oldest makes it recent');
    cache.set('github:acme/app', sha(500), lock);
    assert.equal(cache.size, 500);
    assert.ok(cache.get('github:acme/app', sha(0)));
    assert.equal(cache.get('github:acme/app', sha(1)), undefined, 'the least recently used went');
    assert.ok(cache.get('github:acme/app', sha(500)));
  });
});

describe('TtlLru', () => {
  it('refreshes the expiry when a key is stored again', () => {
    const time = clock();
    const lru = new TtlLru<string>({ maxEntries: 2, ttlMs: 100, now: time.now });
    lru.set('a', 'first');
    time.advance(90);
    lru.set('a', 'second');
    time.advance(90);
    assert.equal(lru.get('a'), 'second');
  });

  it('treats an entry its reader refuses as a miss and drops it', () => {
    const lru = new TtlLru<string>({ maxEntries: 2, ttlMs: 100, now: clock().now });
    lru.set('a', 'value');
    assert.equal(
      lru.get('a', (value) => value !== 'value'),
      undefined,
    );
    assert.deepEqual({ hits: lru.hits, misses: lru.misses, size: lru.size }, { hits: 0, misses: 1, size: 0 });
  });

  it('deletes the entries a predicate selects', () => {
    const lru = new TtlLru<number>({ maxEntries: 10, ttlMs: 100, now: clock().now });
    for (const [key, value] of [['a', 1], ['b', 2], ['c', 3]] as const) lru.set(key, value);
    assert.equal(lru.deleteWhere((value) => value % 2 === 1), 2);
    assert.equal(lru.get('b'), 2);
    assert.equal(lru.size, 1);
  });
});
