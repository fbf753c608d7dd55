import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import v8 from 'node:v8';
import vm from 'node:vm';
import { RunHarness, jobPlan, startedJob } from '../../support/machines.ts';

// V8's own verdict on an object's layout; the flag only allows the %-syntax in functions compiled after it.
v8.setFlagsFromString('--allow-natives-syntax');
const hasFastProperties = vm.runInThisContext('(object) => %HasFastProperties(object)') as (object: object) => boolean;

describe('contexts a live run keeps stay compact (machines/assign.ts)', () => {
  it('a job context after several assigns keeps fast properties, not a 1.6 KB dictionary', () => {
    const job = startedJob();
    assert.ok(Object.keys(job.context).length > 20, 'the job context is past the size at which Object.assign makes a dictionary');
    assert.equal(hasFastProperties(job.context), true);
  });

  it('a run context after its jobs moved on keeps fast properties too', () => {
    const h = RunHarness.start([jobPlan('build'), jobPlan('test')]);
    h.dispatch('build', 2_000);
    const run = h.snapshot;
    assert.ok(Object.keys(run.context).length > 20);
    assert.equal(hasFastProperties(run.context), true);
    assert.equal(hasFastProperties(h.child('build').context), true);
  });
});

const haveSameMap = vm.runInThisContext('(a, b) => %HaveSameMap(a, b)') as (a: object, b: object) => boolean;

describe('objects every live run keeps share their hidden class', () => {
  it("two jobs' enteredAt records share one hidden class (a spread copy gave each its own, 0.2 KB)", () => {
    const [first, second] = [startedJob(), startedJob()];
    assert.deepEqual(Object.keys(first.context.enteredAt), Object.keys(second.context.enteredAt));
    assert.equal(haveSameMap(first.context.enteredAt, second.context.enteredAt), true);
  });
});
