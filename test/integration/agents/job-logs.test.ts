import assert from 'node:assert/strict';
import { it } from 'node:test';
import { appendLogChunk, readJobLogs } from '../../../src/db/job-logs.ts';
import { describeEachKind, withTestDatabase } from '../../support/database.ts';

const T0 = 1_700_000_000_000;
const base = { runId: 'run-1', dispatchId: 'd-1' };

await describeEachKind('job logs', (kind) => {
  it('stores lines as given with their UTF-8 byte count and reads them back in arrival order', () =>
    withTestDatabase(kind, async ({ db }) => {
      assert.equal(await appendLogChunk(db, { ...base, jobKey: 'build', stepIndex: 0, lines: ['héllo', 'wörld ✓'], now: T0 }), 6 + 10);
      await appendLogChunk(db, { ...base, jobKey: 'build', stepIndex: -1, lines: ['runner line'], now: T0 + 1 });
      await appendLogChunk(db, { ...base, jobKey: 'build', stepIndex: 0, lines: ['third'], now: T0 + 2, sentAt: T0 - 5 });
      const chunks = await readJobLogs(db, { runId: 'run-1' });
      assert.deepEqual(
        chunks.map(({ id: _id, ...chunk }) => chunk),
        [
          { jobKey: 'build', dispatchId: 'd-1', stepIndex: 0, lines: ['héllo', 'wörld ✓'], at: T0, sentAt: null },
          { jobKey: 'build', dispatchId: 'd-1', stepIndex: -1, lines: ['runner line'], at: T0 + 1, sentAt: null },
          { jobKey: 'build', dispatchId: 'd-1', stepIndex: 0, lines: ['third'], at: T0 + 2, sentAt: T0 - 5 },
        ],
      );
      assert.ok(chunks.every((chunk, i) => i === 0 || chunk.id > (chunks[i - 1]?.id ?? Infinity)));
      const rows = await db.selectFrom('job_logs').select('bytes').orderBy('id').execute();
      assert.deepEqual(rows.map((r) => r.bytes), [16, 11, 5]);
    }));

  it('filters by job and step, never crosses runs, and pages with limit and afterId', () =>
    withTestDatabase(kind, async ({ db }) => {
      for (const [runId, jobKey, stepIndex] of [
        ['run-1', 'build', 0],
        ['run-1', 'test', 0],
        ['run-1', 'build', 1],
        ['run-2', 'build', 0],
        ['run-1', 'build', 1],
      ] as const) {
        await appendLogChunk(db, { runId, dispatchId: 'd', jobKey, stepIndex, lines: [`${runId}/${jobKey}/${stepIndex}`], now: T0 });
      }
      const lines = (chunks: { lines: string[] }[]) => chunks.flatMap((c) => c.lines);
      assert.deepEqual(lines(await readJobLogs(db, { runId: 'run-1', jobKey: 'build' })), ['run-1/build/0', 'run-1/build/1', 'run-1/build/1']);
      assert.deepEqual(lines(await readJobLogs(db, { runId: 'run-1', stepIndex: 0 })), ['run-1/build/0', 'run-1/test/0']);
      assert.deepEqual(lines(await readJobLogs(db, { runId: 'run-1', jobKey: 'test', stepIndex: 1 })), []);
      assert.deepEqual(lines(await readJobLogs(db, { runId: 'run-3' })), []);
      const first = await readJobLogs(db, { runId: 'run-1', limit: 2 });
      assert.equal(first.length, 2);
      const rest = await readJobLogs(db, { runId: 'run-1', afterId: first[1]?.id ?? 0 });
      assert.deepEqual(lines(rest), ['run-1/build/1', 'run-1/build/1']);
    }));

  it('skips an empty chunk and keeps a NUL-bearing line readable (stored as U+FFFD)', () =>
    withTestDatabase(kind, async ({ db }) => {
      assert.equal(await appendLogChunk(db, { ...base, jobKey: 'build', stepIndex: 0, lines: [], now: T0 }), 0);
      await appendLogChunk(db, { ...base, jobKey: 'build', stepIndex: 0, lines: ['a\u0000b'], now: T0 });
      const chunks = await readJobLogs(db, { runId: 'run-1' });
      assert.deepEqual(chunks.map((c) => c.lines), [['a\ufffdb']]);
    }));
});
