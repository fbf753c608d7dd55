import assert from 'node:assert/strict';
import { it } from 'node:test';
import type { Kysely } from 'kysely';
import { appendLogChunks, inWrittenOrder, readJobLogs } from '../../../src/db/job-logs.ts';
import type { LogChunkInput } from '../../../src/db/job-logs.ts';
import type { Schema } from '../../../src/db/schema.ts';
import { describeEachKind, withTestDatabase } from '../../support/database.ts';
import { insertRun, startApiServer } from './api-server.ts';

const T0 = 1_700_000_000_000;

/** A job whose agent reported two named steps, as the job projection stores them. */
async function insertJob(db: Kysely<Schema>, runId: string, jobKey: string): Promise<void> {
  const steps = [
    { index: 0, name: 'install', status: 'success' },
    { index: 1, name: 'unit tests', status: 'success' },
  ];
  await db
    .insertInto('jobs')
    .values({ run_id: runId, job_key: jobKey, status: 'success', waiting_reason: null, agent_id: 'a-1', dispatch_id: `d-${jobKey}`, outcome: 'success', init_failure: null, updated_at: T0, steps: JSON.stringify(steps), duration_ms: 100, outputs: null })
    .execute();
}

/**
 * As the reference agent used to send them: step 0's batch overtook the runner's clone line, which
 * waited for its batch delay; the agent's timestamps hold the order the lines were written in.
 */
const ARRIVALS: Omit<LogChunkInput, 'runId' | 'dispatchId'>[] = [
  { jobKey: 'build', stepIndex: 0, lines: ['npm ci', 'added 12 packages'], now: T0 + 200, sentAt: T0 + 50 },
  { jobKey: 'build', stepIndex: -1, lines: ['[switchyard] cloning file:///srv/app at main (abc)'], now: T0 + 210, sentAt: T0 + 10 },
  { jobKey: 'build', stepIndex: 1, lines: ['ok 1 - adds'], now: T0 + 220, sentAt: T0 + 90 },
];

await describeEachKind('run logs by step name, in the order they were written', (kind) => {
  it('text: the clone line first (by the agent times), each line prefixed [job › step name]', () =>
    withTestDatabase(kind, async ({ db }) => {
      await insertRun(db, 'run-1');
      await insertJob(db, 'run-1', 'build');
      await appendLogChunks(db, ARRIVALS.map((chunk) => ({ ...chunk, runId: 'run-1', dispatchId: 'd-build' })));
      const api = await startApiServer(db, T0);
      try {
        const text = await (await api.call('/api/v1/runs/run-1/logs', { headers: { accept: 'text/plain' } })).text();
        const jobText = await (await api.call('/api/v1/runs/run-1/jobs/build/logs', { headers: { accept: 'text/plain' } })).text();
        assert.equal(jobText, text);
        assert.equal(
          text,
          [
            '[build › runner] [switchyard] cloning file:///srv/app at main (abc)',
            '[build › install] npm ci',
            '[build › install] added 12 packages',
            '[build › unit tests] ok 1 - adds',
            '',
          ].join('\n'),
        );
        const byName = await (await api.call('/api/v1/runs/run-1/logs?step=unit%20tests', { headers: { accept: 'text/plain' } })).text();
        assert.equal(byName, '[build › unit tests] ok 1 - adds\n');
      } finally {
        await api.close();
      }
    }));

  it('JSON: chunks in arrival order with their step names and agent times; next pages on by id', () =>
    withTestDatabase(kind, async ({ db }) => {
      await insertRun(db, 'run-1');
      await insertJob(db, 'run-1', 'build');
      await appendLogChunks(db, ARRIVALS.map((chunk) => ({ ...chunk, runId: 'run-1', dispatchId: 'd-build' })));
      const api = await startApiServer(db, T0);
      try {
        type Page = { next: number; chunks: { id: number; stepName: string; sentAt: number | null }[] };
        const first = (await (await api.call('/api/v1/runs/run-1/logs?limit=2')).json()) as Page;
        assert.deepEqual(first.chunks.map((c) => c.stepName), ['install', 'runner']);
        assert.deepEqual(first.chunks.map((c) => c.sentAt), [T0 + 50, T0 + 10]);
        assert.equal(first.next, first.chunks[1]?.id);
        const rest = (await (await api.call(`/api/v1/runs/run-1/logs?after=${first.next}`)).json()) as Page;
        assert.deepEqual(rest.chunks.map((c) => c.stepName), ['unit tests']);
        const empty = (await (await api.call(`/api/v1/runs/run-1/logs?after=${rest.next}`)).json()) as Page;
        assert.deepEqual([empty.chunks, empty.next], [[], rest.next]);
      } finally {
        await api.close();
      }
    }));

  it('chunks stored without an agent timestamp keep their arrival order', () =>
    withTestDatabase(kind, async ({ db }) => {
      await insertRun(db, 'run-1');
      const old = ARRIVALS.map(({ sentAt: _sentAt, ...chunk }) => ({ ...chunk, now: T0, runId: 'run-1', dispatchId: 'd-build' }));
      await appendLogChunks(db, old);
      const chunks = inWrittenOrder(await readJobLogs(db, { runId: 'run-1' }));
      assert.deepEqual(chunks.map((c) => [c.stepIndex, c.sentAt]), [[0, null], [-1, null], [1, null]]);
    }));
});
