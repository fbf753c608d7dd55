import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { asksNothingDurable, jobChanged, jobRowsToWrite, planEntry, storedEffects } from '../../../actors/runs/commit-plan.ts';
import type { EntryFacts, WrittenJob } from '../../../actors/runs/commit-plan.ts';
import { MAX_TAIL_EVENTS } from '../../../actors/runs/snapshot-policy.ts';

/** An event that changed the run, right after its stored snapshot; a snapshot much heavier than its tail. */
const CHANGED: EntryFacts = { firesDeadline: false, stateUnchanged: false, asksDurable: true, tail: 1, isNewRun: false, runDone: false, closing: false };
const UNCHANGED: EntryFacts = { ...CHANGED, stateUnchanged: true, asksDurable: false };
const LIGHT_TAIL = { storedSeq: 10, snapshotBytes: 10_000, tailBytes: 500 };
const HEAVY_TAIL = { storedSeq: 10, snapshotBytes: 10_000, tailBytes: 10_000 };

describe('what an entry writes (actors/runs/commit-plan.ts)', () => {
  it('rule 2: an event that changed nothing and asked for nothing durable writes its journal row alone', () => {
    assert.deepEqual(planEntry(UNCHANGED, LIGHT_TAIL), { write: 'journal', snapshot: 'store' });
    assert.deepEqual(planEntry({ ...UNCHANGED, tail: 3 }, LIGHT_TAIL), { write: 'journal', snapshot: 'defer' }, 'behind a tail it joins the tail');
  });

  it('rule 2: a fired deadline, a durable ask or a changed snapshot writes the state', () => {
    for (const facts of [{ ...UNCHANGED, firesDeadline: true }, { ...UNCHANGED, asksDurable: true }, { ...UNCHANGED, stateUnchanged: false }]) {
      assert.equal(planEntry(facts, LIGHT_TAIL).write, 'state', JSON.stringify(facts));
    }
  });

  it('rule 2 behind a tail the tail cannot take: the unchanged entry stores a snapshot instead (the stored seq cannot skip the tail)', () => {
    assert.deepEqual(planEntry({ ...UNCHANGED, tail: 4 }, HEAVY_TAIL), { write: 'state', snapshot: 'store' });
  });

  it('rule 3: the snapshot is deferred while the tail may take the event; stored when it is too long or too heavy', () => {
    assert.deepEqual(planEntry({ ...CHANGED, tail: 2 }, LIGHT_TAIL), { write: 'state', snapshot: 'defer' });
    assert.deepEqual(planEntry({ ...CHANGED, tail: MAX_TAIL_EVENTS }, LIGHT_TAIL), { write: 'state', snapshot: 'store' });
    assert.deepEqual(planEntry({ ...CHANGED, tail: 2 }, HEAVY_TAIL), { write: 'state', snapshot: 'store' });
  });

  it('rule 3: a new run, a finished run and a run being closed always store their snapshot', () => {
    for (const facts of [{ ...CHANGED, isNewRun: true }, { ...CHANGED, runDone: true }, { ...CHANGED, closing: true }]) {
      assert.deepEqual(planEntry({ ...facts, tail: 2 }, LIGHT_TAIL), { write: 'state', snapshot: 'store' }, JSON.stringify(facts));
    }
  });

  it('rule 4: a job is projected only if its live snapshot moved, and written only if its row text differs', () => {
    const live = { value: 'queued' };
    const written = new Map<string, WrittenJob>([['build', { digest: 'x', from: live }]]);
    assert.equal(jobChanged(written, 'build', live), false);
    assert.equal(jobChanged(written, 'build', { value: 'queued' }), true, 'another snapshot object');
    assert.equal(jobChanged(written, 'test', undefined), false, 'no live job and none written');
    const rows = [
      { jobKey: 'build', json: '{"status":"queued"}' },
      { jobKey: 'test', json: '{"status":"pending"}' },
    ];
    const first = jobRowsToWrite(rows, written, () => live);
    assert.deepEqual(first.map((row) => row.jobKey), ['build', 'test']);
    const next = { value: 'queued' };
    assert.deepEqual(jobRowsToWrite(rows, written, () => next), [], 'the same text is not written again');
    assert.equal(written.get('build')?.from, next, 'the row is now known to show the newer snapshot');
  });

  it('rule 5: placement requests stay out of the outbox (a restore asks again); every other effect is kept', () => {
    assert.deepEqual(storedEffects([{ kind: 'requestPlacement' }, { kind: 'sendDispatch' }, { kind: 'askAckHolder' }]), [{ kind: 'sendDispatch' }, { kind: 'askAckHolder' }]);
    assert.equal(asksNothingDurable([{ type: 'requestPlacement' }]), true);
    assert.equal(asksNothingDurable([{ type: 'requestPlacement' }, { type: 'sendCancel' }]), false);
  });
});
