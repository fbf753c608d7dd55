import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { DispatchPathTraces, StageTrace } from '../../../lib/stage-trace.ts';

/** A clock a test moves by hand, in milliseconds. */
function handClock(start = 1_000) {
  let now = start;
  return { now: () => now, advance: (ms: number) => (now += ms) };
}

function observed() {
  const seen: [string, number][] = [];
  return { seen, traces: new DispatchPathTraces((stage, seconds) => seen.push([stage, Math.round(seconds * 1e6) / 1e6])) };
}

describe('StageTrace and DispatchPathTraces', () => {
  it('each stage is its mark minus the one before, the first from the start, and the whole way is their sum', () => {
    const clock = handClock();
    const { seen, traces } = observed();
    const trace = new StageTrace(clock.now);
    clock.advance(2);
    trace.mark('request.read');
    clock.advance(3);
    trace.mark('lockfile.read');
    traces.bind('run-1', trace);
    clock.advance(5);
    traces.mark('run-1', 'run.committed');
    clock.advance(1);
    traces.finish('run-1', 'dispatch.sent');
    assert.deepEqual(seen, [
      ['request.read', 0.002],
      ['lockfile.read', 0.003],
      ['run.committed', 0.005],
      ['dispatch.sent', 0.001],
      ['total', 0.011],
    ]);
  });

  it('a finished trace is gone: a second dispatch of the run, or a run never traced, observes nothing', () => {
    const clock = handClock();
    const { seen, traces } = observed();
    traces.bind('run-1', new StageTrace(clock.now));
    traces.finish('run-1', 'dispatch.sent');
    const once = seen.length;
    traces.finish('run-1', 'dispatch.sent');
    traces.mark('run-2', 'run.committed');
    traces.finish('run-2', 'dispatch.sent');
    assert.equal(seen.length, once);
  });

  it("a delivery's trace goes with its first run only: its second run neither marks it nor closes it", () => {
    const clock = handClock();
    const { seen, traces } = observed();
    const trace = new StageTrace(clock.now);
    traces.bind('first', trace);
    traces.bind('second', trace);
    traces.mark('second', 'run.committed');
    traces.finish('second', 'dispatch.sent');
    assert.equal(seen.length, 0, 'the second run was never bound');
    traces.finish('first', 'dispatch.sent');
    assert.deepEqual(seen.map(([stage]) => stage), ['dispatch.sent', 'total']);
  });

  it("a run's first trace stays: a duplicate delivery of the run being created does not take its place", () => {
    const clock = handClock();
    const { seen, traces } = observed();
    const first = new StageTrace(clock.now);
    first.mark('request.read');
    traces.bind('run-1', first);
    traces.bind('run-1', new StageTrace(clock.now));
    traces.finish('run-1', 'dispatch.sent');
    assert.deepEqual(seen.map(([stage]) => stage), ['request.read', 'dispatch.sent', 'total']);
  });

  it('holds at most 1,000 open traces: a run whose job never goes out gives its place to newer ones', () => {
    const clock = handClock();
    const { seen, traces } = observed();
    for (let i = 0; i <= 1_000; i++) traces.bind(`run-${i}`, new StageTrace(clock.now));
    traces.finish('run-0', 'dispatch.sent');
    assert.equal(seen.length, 0, 'the oldest was dropped');
    traces.finish('run-1000', 'dispatch.sent');
    assert.equal(seen.length, 2);
  });
});
