import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { WaitingTally } from '../../../actors/runs/waiting-tally.ts';

describe('WaitingTally', () => {
  it('counts the kinds of the runs touched since the last count, and drops runs that left memory', () => {
    const live = new Map<string, string[]>([['r1', ['capacity', 'needs']], ['r2', ['capacity']], ['r3', []]]);
    const tally = new WaitingTally((runId) => live.get(runId));
    for (const runId of live.keys()) tally.touch(runId);
    assert.deepEqual(Object.fromEntries(tally.counts()), { capacity: 2, needs: 1 });
    live.set('r1', ['approval']);
    assert.deepEqual(Object.fromEntries(tally.counts()), { capacity: 2, needs: 1 }, 'an untouched run keeps what it was counted for');
    tally.touch('r1');
    live.delete('r2');
    tally.touch('r2');
    assert.deepEqual(Object.fromEntries(tally.counts()), { approval: 1 }, 'kinds no job waits for are left out');
  });

  it('takes a run that left memory out at once: no count has to come for it to be forgotten', () => {
    let reads = 0;
    const tally = new WaitingTally(() => {
      reads += 1;
      return ['capacity'];
    });
    tally.touch('r1');
    tally.touch('r2');
    assert.deepEqual(Object.fromEntries(tally.counts()), { capacity: 2 });
    tally.touch('r1');
    tally.gone('r1');
    tally.gone('r3');
    assert.deepEqual(Object.fromEntries(tally.counts()), { capacity: 1 });
    assert.equal(reads, 2, 'the run gone is not read again');
  });
});
