import assert from 'node:assert/strict';
import { it } from 'node:test';
import { readRunInputSummaries } from '../../../src/db/run-queries.ts';
import { RunSources } from '../../../src/pipeline/run-source.ts';
import { describeEachKind, withTestDatabase } from '../../support/database.ts';

const sourceOf = (n: number) => ({ repository: 'acme/app', repoUrl: null, ref: 'main', sha: String(n).repeat(40).slice(0, 40), provider: 'api', event: null, workflow: { name: `wf-${n}`, jobs: [] } });

await describeEachKind('run sources, read from the runs table when not remembered', (kind) => {
  it('the sources asked for while one read is in flight are read by one query; a run asked twice is read once', async () => {
    await withTestDatabase(kind, async ({ db }) => {
      const runIds = Array.from({ length: 6 }, (_, n) => `run-${n}`);
      await db
        .insertInto('runs')
        .values(runIds.map((runId, n) => ({ run_id: runId, workflow_name: `wf-${n}`, repository: 'acme/app', status: 'running', created_at: 1, updated_at: 1, finished_at: null, failure_reason: null, init_failure: null, input_summary: JSON.stringify(sourceOf(n)) })))
        .execute();
      const reads: string[][] = [];
      const sources = new RunSources(async (ids) => {
        reads.push(ids);
        return readRunInputSummaries(db, ids);
      });
      const asked = [...runIds, 'run-1', 'run-unknown'];
      const found = await Promise.all(asked.map((runId) => sources.of(runId)));
      assert.deepEqual(found.map((source) => source?.workflow.name ?? null), ['wf-0', 'wf-1', 'wf-2', 'wf-3', 'wf-4', 'wf-5', 'wf-1', null]);
      assert.deepEqual(reads, [['run-0'], ['run-1', 'run-2', 'run-3', 'run-4', 'run-5', 'run-unknown']], 'a lone read at once, the rest together; run-1 once');
      assert.equal((await sources.of('run-3'))?.sha, sourceOf(3).sha);
      assert.equal(reads.length, 2, 'a source read is remembered');
    });
  });
});
