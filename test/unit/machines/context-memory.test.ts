import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import v8 from 'node:v8';
import vm from 'node:vm';
import { startedJob } from '../../support/machines.ts';

// V8's own verdict on an object's layout; the flag only allows the %-syntax in functions compiled after it.
v8.setFlagsFromString('--allow-natives-syntax');
const haveSameMap = vm.runInThisContext('(a, b) => %HaveSameMap(a, b)') as (a: object, b: object) => boolean;

describe('objects every live run keeps share their hidden class', () => {
  it("two jobs' enteredAt records share one hidden class (a spread copy gave each its own, 0.2 KB)", () => {
    const [first, second] = [startedJob(), startedJob()];
    assert.deepEqual(Object.keys(first.context.enteredAt), Object.keys(second.context.enteredAt));
    assert.equal(haveSameMap(first.context.enteredAt, second.context.enteredAt), true);
  });
});
