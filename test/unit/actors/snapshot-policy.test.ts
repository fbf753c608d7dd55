import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { MAX_TAIL_EVENTS, mayJoinTail, noteSerialized, type StoredSnapshotMark } from '../../../actors/runs/snapshot-policy.ts';
import type { SerializedEntry } from '../../../actors/runs/ports.ts';

function entry(snapshotJson: string | null, events: string[], flags: { deferred?: boolean; unchanged?: boolean } = {}): SerializedEntry {
  return {
    runId: 'r',
    isNewRun: false,
    events,
    effects: [],
    ...flags,
    snapshot: { seq: 1, machineId: 'run', machineVersion: 1, status: 'running', updatedAt: 0, json: snapshotJson },
    run: { workflowName: 'wf', repository: null, status: 'running', createdAt: 0, finishedAt: null, failureReason: null, initFailure: 'null' },
    jobs: [],
    removedJobs: [],
    timers: [],
  };
}

describe('snapshot policy: when an entry stores the snapshot and when it joins the journal tail', () => {
  it('a tail takes events while it is shorter than MAX_TAIL_EVENTS and lighter than the snapshot', () => {
    const mark: StoredSnapshotMark = { storedSeq: 0, snapshotBytes: 1000, tailBytes: 999 };
    assert.equal(mayJoinTail(mark, MAX_TAIL_EVENTS - 1), true);
    assert.equal(mayJoinTail(mark, MAX_TAIL_EVENTS), false, 'the count bounds it');
    assert.equal(mayJoinTail({ ...mark, tailBytes: 1000 }, 2), false, 'the bytes bound it');
    assert.equal(mayJoinTail({ ...mark, snapshotBytes: 0, tailBytes: 0 }, 1), false, 'a snapshot of unknown size (a restored run) is stored at the next change');
  });

  it('a stored snapshot sets its size and empties the tail; a deferred entry adds its journal rows; an unchanged one moving the seq adds nothing', () => {
    const mark: StoredSnapshotMark = { storedSeq: 0, snapshotBytes: 0, tailBytes: 0 };
    noteSerialized(mark, entry('x'.repeat(500), ['e'.repeat(40)]));
    assert.deepEqual([mark.snapshotBytes, mark.tailBytes], [500, 0]);
    noteSerialized(mark, entry(null, ['a'.repeat(100), 'b'.repeat(20)], { deferred: true }));
    noteSerialized(mark, entry(null, ['c'.repeat(30)], { deferred: true, unchanged: true }));
    assert.deepEqual([mark.snapshotBytes, mark.tailBytes], [500, 150]);
    noteSerialized(mark, entry('y'.repeat(800), ['d']));
    assert.deepEqual([mark.snapshotBytes, mark.tailBytes], [800, 0]);
    noteSerialized(mark, entry(null, ['f'.repeat(60)], { unchanged: true }));
    assert.deepEqual([mark.snapshotBytes, mark.tailBytes], [800, 0]);
  });
});
