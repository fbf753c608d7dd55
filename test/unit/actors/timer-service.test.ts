import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { ArmedTimer } from '../../../actors/runs/timer-service.ts';
import { TimerService } from '../../../actors/runs/timer-service.ts';
import { ManualClock } from '../../support/manual-clock.ts';

function timer(runId: string, deadlineId: string, dueAt: number): ArmedTimer {
  return { runId, deadlineId, kind: 'ack', jobKey: 'build', dueAt };
}

function setup() {
  const clock = new ManualClock();
  const fired: string[] = [];
  const timers = new TimerService(clock, (t) => fired.push(`${t.runId}/${t.deadlineId}`));
  return { clock, fired, timers };
}

describe('TimerService: the deadlines of the runs owned here', () => {
  it('fires in due order; re-arming an id replaces its due time; a disarmed deadline never fires', async () => {
    const { clock, fired, timers } = setup();
    timers.arm(timer('run-1', 'ack', 300));
    timers.arm(timer('run-2', 'ack', 100));
    timers.arm(timer('run-1', 'queue', 200));
    timers.arm(timer('run-2', 'ack', 400));
    timers.disarm('run-1', 'queue');
    assert.equal(timers.size, 2);
    await clock.advance(1_000);
    assert.deepEqual(fired, ['run-1/ack', 'run-2/ack']);
    assert.equal(timers.size, 0);
  });

  it("a run that ends drops its own deadlines and no other run's", async () => {
    const { clock, fired, timers } = setup();
    for (let i = 0; i < 100; i++) timers.arm(timer(`run-${i}`, 'ack', 100 + i));
    timers.arm(timer('run-7', 'queue', 50));
    timers.disarmRun('run-7');
    timers.disarmRun('never-armed');
    assert.equal(timers.size, 99);
    await clock.advance(1_000);
    assert.equal(fired.length, 99);
    assert.ok(!fired.some((name) => name.startsWith('run-7/')), 'run-7 fired nothing');
    timers.arm(timer('run-7', 'ack', 2_000));
    assert.equal(timers.size, 1, 'a run can arm again after it dropped its deadlines');
    await clock.advance(1_000);
    assert.deepEqual(fired.slice(99), ['run-7/ack']);
  });
});
