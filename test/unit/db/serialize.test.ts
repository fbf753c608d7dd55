import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { serializeEntry, toCommitRows } from '../../../src/db/commit-rows.ts';
import { PermanentStoreError, TransientStoreError, UnstorableEntryError, classifyDatabaseError } from '../../../src/db/errors.ts';
import { toJson } from '../../../src/db/json.ts';
import { entry } from '../../integration/db/fixtures.ts';

function deep(levels: number): unknown {
  let value: unknown = [];
  for (let i = 0; i < levels; i++) value = [value];
  return value;
}

describe('serializing a commit entry once, at submit', () => {
  it('names the part that JSON cannot hold: too deep, a BigInt, a cycle', () => {
    const cyclic: Record<string, unknown> = {};
    cyclic['self'] = cyclic;
    const cases: [Parameters<typeof entry>[2], RegExp][] = [
      [{ effects: [{ effectId: 'e', kind: 'sendDispatch', payload: deep(100_000) }] }, /sendDispatch effect at seq 3 .* nested too deeply/],
      [{ events: [{ seq: 3, event: { n: 1n }, receivedAt: 1, stateAfter: null }] }, /event at seq 3 .* holds a BigInt/],
      [{ removedJobs: [], run: { ...entry('r', 3).run, inputSummary: cyclic } }, /input summary at seq 3 .* holds a cycle/],
    ];
    for (const [overrides, message] of cases) {
      assert.throws(() => serializeEntry(entry('r', 3, overrides)), (error: unknown) => {
        assert.ok(error instanceof UnstorableEntryError);
        assert.equal(error.runId, 'r');
        assert.match(error.message, message);
        return true;
      });
    }
  });

  it('stores NUL and lone surrogates as U+FFFD in that one step, anywhere in a row, and leaves escaped text alone', () => {
    assert.equal(toJson({ 'k\u0000': ['a\u0000b', '\ud800', '\\u0000', '😀'] }), '{"k\\ufffd":["a\\ufffdb","\\ufffd","\\\\u0000","😀"]}');
    const rows = toCommitRows([serializeEntry(entry('r', 1, { run: { ...entry('r', 1).run, failureReason: 'bad\u0000reason' } }))]);
    assert.match(rows.runs[0] ?? '', /"failure_reason":"bad\\ufffdreason"/);
    assert.doesNotThrow(() => JSON.parse(`[${rows.events.join(',')},${rows.jobs.join(',')},${rows.snapshots.join(',')}]`));
  });
});

describe('folding a batch of one run: snapshots and journal tails', () => {
  const fold = (...entries: Parameters<typeof serializeEntry>[0][]) => toCommitRows(entries.map(serializeEntry));
  const snapshotSeqs = (rows: ReturnType<typeof toCommitRows>) => rows.snapshots.map((s) => (JSON.parse(s) as { seq: number }).seq);
  const runStatus = (rows: ReturnType<typeof toCommitRows>) => rows.runs.map((r) => (JSON.parse(r) as { status: string }).status);
  const changed = (seq: number, status: string, overrides: Parameters<typeof entry>[2] = {}) => entry('r', seq, { run: { ...entry('r', seq).run, status }, ...overrides });

  it('a deferred entry after a snapshot leaves the snapshot at its seq and still writes its run and job rows', () => {
    const rows = fold(changed(5, 'running'), changed(6, 'queued', { deferSnapshot: true }));
    assert.deepEqual(snapshotSeqs(rows), [5]);
    assert.deepEqual(rows.snapshotSeqs, []);
    assert.deepEqual(runStatus(rows), ['queued']);
    assert.equal(rows.jobs.length, 1);
    assert.equal(rows.events.length, 2, 'every event is journaled');
  });

  it('only deferred entries write no snapshot row; an unchanged one among them writes no run row of its own', () => {
    const rows = fold(changed(6, 'queued', { deferSnapshot: true }), entry('r', 7, { deferSnapshot: true, unchanged: true, jobs: [] }));
    assert.deepEqual([rows.snapshots, rows.snapshotSeqs], [[], []]);
    assert.deepEqual(runStatus(rows), ['queued']);
    assert.match(rows.runs[0] ?? '', /"updated_at":1007/, 'the rows carry the time of the batch\'s latest event');
  });

  it('an unchanged entry right after a snapshot moves only its seq; a snapshot later in the batch wins', () => {
    assert.deepEqual(fold(entry('r', 8, { unchanged: true, jobs: [] })).snapshotSeqs.map((s) => (JSON.parse(s) as { seq: number }).seq), [8]);
    const rows = fold(changed(6, 'queued', { deferSnapshot: true }), changed(7, 'success'));
    assert.deepEqual(snapshotSeqs(rows), [7]);
    assert.deepEqual(rows.finishedRunIds, ['r']);
  });
});

describe('classifying database errors', () => {
  const pgError = (code: string) => Object.assign(new Error(`pg ${code}`), { code });
  it('transient: connection, rollback, resources, operator intervention, system errors, socket and driver failures', () => {
    for (const code of ['08006', '40001', '40P01', '53300', '57P01', '57014', '58030', '55P03']) {
      assert.ok(classifyDatabaseError(pgError(code)) instanceof TransientStoreError, code);
    }
    assert.ok(classifyDatabaseError(pgError('ECONNRESET')) instanceof TransientStoreError);
    assert.ok(classifyDatabaseError(new Error('Connection terminated unexpectedly')) instanceof TransientStoreError);
  });
  it('permanent: data exceptions, constraints, limits, syntax, a dropped database, and anything unknown', () => {
    for (const code of ['22003', '22P05', '23502', '54001', '42P01', '57P04', 'XX000']) {
      assert.ok(classifyDatabaseError(pgError(code)) instanceof PermanentStoreError, code);
    }
    assert.ok(classifyDatabaseError(new TypeError('boom')) instanceof PermanentStoreError);
  });
});
