import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import v8 from 'node:v8';
import vm from 'node:vm';
import { RunHarness, jobPlan, runInput, startedJob } from '../../support/machines.ts';

// V8's own verdict on an object's layout; the flag only allows the %-syntax in functions compiled after it.
v8.setFlagsFromString('--allow-natives-syntax');
const haveSameMap = vm.runInThisContext('(a, b) => %HaveSameMap(a, b)') as (a: object, b: object) => boolean;
const hasFastProperties = vm.runInThisContext('(a) => %HasFastProperties(a)') as (a: object) => boolean;

describe("a run's and a job's context stay fast objects through their assigns", () => {
  // xstate's assign copies the context with Object.assign({}, context, update): V8 keeps a copy of
  // more than 19 keys as a dictionary, and such a copy cost ~100 times a fast one (7 µs against 70 ns).
  it('a job in every step of its way, and its run, keep fast properties (their fixed fields are grouped in spec)', () => {
    const job = startedJob();
    assert.ok(Object.keys(job.context).length <= 19, `the job context has ${Object.keys(job.context).length} keys`);
    assert.equal(hasFastProperties(job.context), true);
    const run = new RunHarness(runInput([jobPlan('build')]));
    assert.ok(Object.keys(run.snapshot.context).length <= 19, `the run context has ${Object.keys(run.snapshot.context).length} keys`);
    assert.equal(hasFastProperties(run.snapshot.context), true);
  });
});

describe('objects every live run keeps share their hidden class', () => {
  it("two jobs' enteredAt records share one hidden class (a spread copy gave each its own, 0.2 KB)", () => {
    const [first, second] = [startedJob(), startedJob()];
    assert.deepEqual(Object.keys(first.context.enteredAt), Object.keys(second.context.enteredAt));
    assert.equal(haveSameMap(first.context.enteredAt, second.context.enteredAt), true);
  });
});
