import assert from 'node:assert/strict';
import { it } from 'node:test';
import type { LockFile, LockWorkflow } from '../../../machines/lock.types.ts';
import { DEFAULT_JOB_TIMEOUTS } from '../../../machines/types.ts';
import type { Delivery } from '../../../src/db/deliveries.ts';
import type { SourceBase } from '../../../src/pipeline/run-source.ts';
import { runIdFor } from '../../../src/pipeline/run-id.ts';
import { createRunStarter } from '../../../src/pipeline/start-runs.ts';
import { IsolatedVmSandbox } from '../../../src/sandbox/index.ts';
import { describeEachKind, testLog, withTestDatabase } from '../../support/database.ts';
import { eventually, startTestRuntime } from '../../support/runtime.ts';
import * as gh from '../../unit/pipeline/github-payloads.ts';
import { github } from '../../unit/pipeline/trigger-helpers.ts';

const onPushToMain = [{ _type: 'push', branches: [{ type: 'glob', pattern: 'main' }], paths: [] }];

function job(name: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { _type: 'static', name, needs: [], runsOn: [{ kind: 'exact', value: 'nobody-has-this' }], steps: [{ name: 's', hasOutputs: false, run: 'true' }], ...extra };
}

/** The first workflow of the delivery: `bad`'s env is an inline expression that throws, `good` is plain. */
const broken = {
  name: 'broken',
  triggers: onPushToMain,
  jobs: [job('bad', { env: { _type: 'inline', expression: '(event) => { throw new Error("no env for " + event.targetBranch) }' } }), job('good')],
} as unknown as LockWorkflow;
/** The second one, after it in the same lock file. */
const healthy = { name: 'healthy', triggers: onPushToMain, jobs: [job('build')] } as unknown as LockWorkflow;
const lock = { schemaVersion: 29, workflows: [broken, healthy] } as unknown as LockFile;
const source: SourceBase = {
  ...{ repository: 'acme/app', repoUrl: null, ref: 'refs/heads/main', sha: 'b'.repeat(40), provider: 'github' },
  ...{ event: github('push', gh.push('refs/heads/main')), trustTier: 'trusted', lockFileSource: 'event' },
};
const delivery: Delivery = { source: 'github', deliveryId: 'd-inline', eventName: 'push', headers: {}, body: Buffer.from('{}'), receivedAt: 0, status: 'processing', attempts: 1 };

await describeEachKind('one delivery, an inline expression failing in its first workflow', (kind) => {
  it('B15: fails only that job; the rest of its run and the next workflow run start as usual', () =>
    withTestDatabase(kind, async ({ db }) => {
      const runtime = await startTestRuntime(db, 'coord-b15');
      const sandbox = new IsolatedVmSandbox();
      try {
        const starter = createRunStarter({ db, createRun: (run) => runtime.supervisor.createRun(run), sandbox, timeouts: DEFAULT_JOB_TIMEOUTS, maxAttempts: 5, now: Date.now, log: testLog });
        const started = await starter.matched(delivery, lock, source);
        assert.deepEqual(started.map((run) => run.workflow), ['broken', 'healthy'], 'both workflows start a run');
        const brokenRun = runIdFor('github', delivery.deliveryId, 'broken');
        const healthyRun = runIdFor('github', delivery.deliveryId, 'healthy');
        const jobs = await eventually(async () => {
          const rows = await db.selectFrom('jobs').select(['run_id', 'job_key', 'status', 'init_failure']).orderBy('job_key').execute();
          return rows.length === 3 ? rows : null;
        });
        const bad = jobs.find((row) => row.job_key === 'bad');
        assert.equal(bad?.status, 'failed');
        const failure = bad?.init_failure as { category?: string; message?: string } | null;
        assert.equal(failure?.category, 'dynamic_eval');
        assert.match(failure?.message ?? '', /no env for main/, 'the expression’s own error is the reason');
        for (const [runId, jobKey] of [[brokenRun, 'good'], [healthyRun, 'build']] as const) {
          assert.equal(runtime.supervisor.jobHasTag(runId, jobKey, 'waits-for-agent'), true, `${jobKey} waits for an agent, as any job does`);
        }
        const healthyStatus = await db.selectFrom('runs').select('status').where('run_id', '=', healthyRun).executeTakeFirstOrThrow();
        assert.notEqual(healthyStatus.status, 'failed', 'the next workflow’s run is not failed');
      } finally {
        sandbox.dispose();
        await runtime.stop();
      }
    }));
});
