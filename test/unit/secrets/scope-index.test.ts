import assert from 'node:assert/strict';
import { it } from 'node:test';
import { SecretScopeIndex } from '../../../src/secrets/scope-index.ts';

it('a failed read is not kept: the next asks again', async () => {
  let calls = 0;
  const index = new SecretScopeIndex(() => (++calls === 1 ? Promise.reject(new Error('connection reset')) : Promise.resolve(['global'])));
  await assert.rejects(index.holding(['global']), /connection reset/);
  assert.deepEqual(await index.holding(['global', 'org:acme']), ['global']);
  assert.deepEqual(await index.holding(['global']), ['global']);
  assert.equal(calls, 2, 'read once more after the failure, then kept');
});
