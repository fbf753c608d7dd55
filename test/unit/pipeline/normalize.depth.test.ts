import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { MAX_PAYLOAD_DEPTH, TOO_DEEP_MARKER, capPayloadDepth } from '../../../src/pipeline/normalize.depth.ts';
import { normalizeGenericEvent } from '../../../src/pipeline/normalize.ts';

// Regression (group-commit poisoning): a payload nested 100 000 levels deep overflowed JSON.stringify downstream.

describe('payload depth cap', () => {
  it('cuts what lies below the cap to a marker and keeps the rest', () => {
    let deep: unknown = [];
    for (let i = 0; i < 100_000; i++) deep = [deep];
    const capped = capPayloadDepth({ ref: 'refs/heads/main', deep }) as { ref: string; deep: unknown };
    assert.equal(capped.ref, 'refs/heads/main');
    let arrays = 0;
    let node: unknown = capped.deep;
    while (Array.isArray(node)) {
      node = node[0];
      arrays += 1;
    }
    assert.equal(node, TOO_DEEP_MARKER);
    assert.equal(arrays, MAX_PAYLOAD_DEPTH - 1, 'the root object is level 1: levels 2..128 are kept');
    assert.doesNotThrow(() => JSON.stringify(capped));
  });

  it('returns a payload within the cap as it is, without copying', () => {
    const payload = { a: [{ b: { c: [1, 'x', null] } }] };
    assert.equal(capPayloadDepth(payload), payload);
  });

  it('applies to generic webhooks too', () => {
    let deep: unknown = {};
    for (let i = 0; i < 10_000; i++) deep = { d: deep };
    const envelope = normalizeGenericEvent('src', 'default', { deep });
    assert.ok(!('dropped' in envelope));
    assert.match(JSON.stringify(envelope.payload), /"\[removed by Switchyard: nested deeper than 128 levels\]"/);
  });
});
