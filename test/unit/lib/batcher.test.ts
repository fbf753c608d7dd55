import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Batcher } from '../../../lib/batcher.ts';

/** A write that records its batches and waits to be let go, so a test decides when it ends. */
function heldWrites() {
  const batches: number[][] = [];
  const releases: (() => void)[] = [];
  const write = async (items: number[]) => {
    batches.push(items);
    await new Promise<void>((resolve) => releases.push(resolve));
    return items.map((n) => (n < 0 ? new Error(`refused ${n}`) : n * 10));
  };
  return { batches, write, release: () => releases.shift()?.() };
}

const tick = () => new Promise((resolve) => setImmediate(resolve));

describe('Batcher', () => {
  it('writes a lone item at once, and the items added during a write together in the next, at most maxBatch a write', async () => {
    const held = heldWrites();
    const writer = new Batcher(held.write, 3);
    const first = writer.add(1);
    await tick();
    assert.deepEqual(held.batches, [[1]], 'nothing waits for company');
    const rest = [2, 3, 4, 5].map((n) => writer.add(n));
    await tick();
    assert.deepEqual(held.batches, [[1]], 'one write in flight at a time');
    held.release();
    await first;
    await tick();
    assert.deepEqual(held.batches, [[1], [2, 3, 4]]);
    held.release();
    await tick();
    held.release();
    assert.deepEqual(await Promise.all(rest), [20, 30, 40, 50], 'each item gets its own result');
    assert.deepEqual(held.batches, [[1], [2, 3, 4], [5]]);
  });

  it('fails only the item given an Error, all of a batch whose write throws, and goes on with the next batch', async () => {
    const held = heldWrites();
    let throwOnBatch = -1;
    const writer = new Batcher(async (items: number[]) => {
      const results = await held.write(items);
      if (held.batches.length - 1 === throwOnBatch) throw new Error('database gone');
      return results;
    }, 10);
    const release = async () => {
      await tick();
      held.release();
    };
    const first = writer.add(0);
    const mixed = Promise.allSettled([writer.add(1), writer.add(-2), writer.add(3)]);
    await release();
    await first;
    await release();
    assert.deepEqual((await mixed).map((o) => (o.status === 'fulfilled' ? o.value : (o.reason as Error).message)), [10, 'refused -2', 30]);
    const lone = writer.add(4);
    throwOnBatch = 3;
    const thrown = Promise.allSettled([writer.add(5), writer.add(6)]);
    await release();
    assert.equal(await lone, 40);
    await release();
    assert.deepEqual((await thrown).map((o) => o.status), ['rejected', 'rejected'], 'the whole batch of the write that threw');
    const after = writer.add(7);
    await release();
    assert.equal(await after, 70, 'the writer still works');
    assert.deepEqual(held.batches, [[0], [1, -2, 3], [4], [5, 6], [7]]);
  });

  it('rejects the items a write gave no result for', async () => {
    const writer = new Batcher((items: number[]) => Promise.resolve(items.slice(1)), 10);
    await assert.rejects(writer.add(1), /gave 0 results for 1 items/);
  });
});
