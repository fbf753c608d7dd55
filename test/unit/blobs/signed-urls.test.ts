import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { urlSigningKey, UrlSigner } from '../../../src/blobs/signed-urls.ts';

const BASE = 'http://127.0.0.1:8080';

function signerAt(clock: { now: number }, masterKey = Buffer.alloc(32, 7)) {
  return new UrlSigner(urlSigningKey(masterKey), () => BASE, () => clock.now);
}

function check(signer: UrlSigner, method: string, url: string) {
  const parsed = new URL(url);
  return signer.verify(method, parsed.pathname, parsed.searchParams);
}

describe('signed blob URLs', () => {
  it('open the object they name, with the method they were made for, until they expire', () => {
    const clock = { now: 1_000_000 };
    const signer = signerAt(clock);
    const url = signer.sign('GET', '/blobs/objects/caches%2Fa', 60_000);
    assert.ok(url.startsWith(`${BASE}/blobs/objects/caches%2Fa?expires=1060000&signature=`));
    assert.deepEqual(check(signer, 'GET', url), { ok: true });
    clock.now = 1_060_000;
    assert.deepEqual(check(signer, 'GET', url), { ok: true }, 'good up to its expiry');
    clock.now = 1_060_001;
    assert.deepEqual(check(signer, 'GET', url), { ok: false, reason: 'expired' });
  });

  it('refuse another object, another method, a moved expiry, a changed signature and a missing one', () => {
    const clock = { now: 5_000 };
    const signer = signerAt(clock);
    const url = new URL(signer.sign('PUT', '/blobs/uploads/u-1', 60_000));
    const signature = url.searchParams.get('signature') ?? '';
    assert.deepEqual(signer.verify('PUT', '/blobs/uploads/u-2', url.searchParams), { ok: false, reason: 'bad signature' });
    assert.deepEqual(signer.verify('GET', '/blobs/uploads/u-1', url.searchParams), { ok: false, reason: 'bad signature' });
    const later = new URLSearchParams(url.searchParams);
    later.set('expires', String(Number(later.get('expires')) + 3_600_000));
    assert.deepEqual(signer.verify('PUT', '/blobs/uploads/u-1', later), { ok: false, reason: 'bad signature' });
    const flipped = new URLSearchParams(url.searchParams);
    flipped.set('signature', `${signature[0] === 'a' ? 'b' : 'a'}${signature.slice(1)}`);
    assert.deepEqual(signer.verify('PUT', '/blobs/uploads/u-1', flipped), { ok: false, reason: 'bad signature' });
    flipped.set('signature', signature.slice(2));
    assert.deepEqual(signer.verify('PUT', '/blobs/uploads/u-1', flipped), { ok: false, reason: 'bad signature' }, 'a shorter signature');
    assert.deepEqual(signer.verify('PUT', '/blobs/uploads/u-1', new URLSearchParams({ expires: '9' })), { ok: false, reason: 'missing signature' });
    assert.deepEqual(signer.verify('PUT', '/blobs/uploads/u-1', new URLSearchParams({ signature })), { ok: false, reason: 'missing signature' });
  });

  it('are signed alike by every coordinator with the same master key, and not by another key', () => {
    const clock = { now: 0 };
    const url = signerAt(clock).sign('GET', '/blobs/objects/k', 1_000);
    assert.deepEqual(check(signerAt(clock), 'GET', url), { ok: true });
    assert.deepEqual(check(signerAt(clock, Buffer.alloc(32, 8)), 'GET', url), { ok: false, reason: 'bad signature' });
  });
});
