import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { backoffMs } from '../../../lib/backoff.ts';

describe('backoffMs: the one retry formula (lib/backoff.ts)', () => {
  it('doubles from the base and stops at the cap', () => {
    const policy = { baseMs: 100, maxMs: 1_000 };
    assert.deepEqual([1, 2, 3, 4, 5, 6].map((retry) => backoffMs(retry, policy)), [100, 200, 400, 800, 1_000, 1_000]);
  });

  it('grows by another factor, or not at all (factor 1: a fixed wait)', () => {
    assert.deepEqual([1, 2, 3].map((retry) => backoffMs(retry, { baseMs: 1_000, maxMs: 60_000, factor: 1.5 })), [1_000, 1_500, 2_250]);
    assert.deepEqual([1, 5].map((retry) => backoffMs(retry, { baseMs: 250, maxMs: Infinity, factor: 1 })), [250, 250]);
  });

  it('adds up to the jitter share at random, still under the cap', () => {
    const policy = { baseMs: 1_000, maxMs: 1_400, jitter: 0.5 };
    assert.equal(backoffMs(1, policy, () => 0), 1_000);
    assert.equal(backoffMs(1, policy, () => 0.5), 1_250);
    assert.equal(backoffMs(1, policy, () => 0.99), 1_400);
  });

  it('a retry number below 1 waits the base', () => {
    assert.equal(backoffMs(0, { baseMs: 5_000, maxMs: 600_000 }), 5_000);
  });
});
