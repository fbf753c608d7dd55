import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { describe, it } from 'node:test';
import type { Kysely } from 'kysely';
import { loadConfig } from '../../../src/config/index.ts';
import type { Schema } from '../../../src/db/schema.ts';
import { createSecrets } from '../../../src/secrets/index.ts';

const db = {} as Kysely<Schema>;

describe('a dispatch crossing to a peer coordinator', () => {
  const key = randomBytes(32).toString('hex');
  const frame = { type: 'job.dispatch', jobId: 'd-1', runId: 'r-1', secrets: { A: 'value-of-a' }, namespacedSecrets: { prod: { B: 'value-of-b' } }, runPublicKey: 'pk' };

  it('is sealed under the master key for the trip and opened by a peer with the same key, which then masks its values', () => {
    const sender = createSecrets({ config: loadConfig({ SWITCHYARD_SECRET_KEY: key }), db, now: Date.now });
    const receiver = createSecrets({ config: loadConfig({ SWITCHYARD_SECRET_KEY: key }), db, now: Date.now });
    const sealed = sender.sealForPeer(frame);
    const text = JSON.stringify(sealed);
    assert.ok(!text.includes('value-of-a') && !text.includes('value-of-b') && !('secrets' in sealed));
    assert.deepEqual(receiver.openFromPeer(sealed), frame);
    assert.equal(receiver.dispatched.redactorOf('d-1')('x value-of-a y value-of-b'), 'x *** y ***');
  });

  it('a peer with another key cannot open it; a frame without secrets passes as it is', () => {
    const sender = createSecrets({ config: loadConfig({ SWITCHYARD_SECRET_KEY: key }), db, now: Date.now });
    const other = createSecrets({ config: loadConfig({ SWITCHYARD_SECRET_KEY: randomBytes(32).toString('hex') }), db, now: Date.now });
    assert.equal(other.openFromPeer(sender.sealForPeer(frame)), null);
    const plain = { type: 'job.dispatch', jobId: 'd-2', runPublicKey: 'pk' };
    assert.equal(sender.sealForPeer(plain), plain);
    assert.equal(other.openFromPeer(plain), plain);
  });
});
