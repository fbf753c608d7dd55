import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { planRun } from '../../../machines/run.plan.ts';
import type { PlanRunOptions } from '../../../machines/run.plan.ts';
import type { LockStaticJob, LockWorkflow } from '../../../machines/lock.types.ts';
import { DEFAULT_JOB_TIMEOUTS } from '../../../machines/types.ts';

function job(name: string, fields: Partial<LockStaticJob> = {}): LockStaticJob {
  return { _type: 'static', name, needs: [], steps: [{ name: 'main', hasOutputs: false }], ...fields };
}

function workflow(jobs: LockWorkflow['jobs'], fields: Partial<LockWorkflow> = {}): LockWorkflow {
  return { name: 'ci', jobs, ...fields };
}

function plan(wf: LockWorkflow, options: Partial<PlanRunOptions> = {}) {
  return planRun({ runId: 'run-1', createdAt: 1_000, workflow: wf, timeouts: DEFAULT_JOB_TIMEOUTS, maxAttempts: 5, repository: 'acme/app', ...options });
}

const keysOf = (wf: LockWorkflow, options: Partial<PlanRunOptions> = {}) => plan(wf, options).jobs.map((p) => p.key);

describe('planRun: a build job first when the workflow source is not cached', () => {
  it('plans __build__<workflow> on a builder, in a group per source, and every job that can run waits for its success', () => {
    const wf = workflow([job('lint'), job('test', { needs: ['lint'] }), job('never', { runsOnAll: { include: [[{ kind: 'exact', value: 'linux' }]], exclude: [] } })], { contentHash: 'a'.repeat(64) });
    const { jobs } = plan(wf, { build: { contentHash: 'a'.repeat(64) } });
    assert.deepEqual(jobs.map((p) => p.key), ['__build__ci', 'lint', 'test', 'never']);
    const [build, lint, test, never] = jobs;
    assert.deepEqual(build?.requirements.runsOn, [{ kind: 'exact', value: 'kici:role:builder' }]);
    assert.deepEqual(build?.concurrency, { key: `acme/app::__build__ci::${'a'.repeat(64)}`, policy: { cancelInProgress: false, max: 1 } });
    assert.deepEqual(lint?.needs, [{ name: '__build__ci', runOn: ['success'] }]);
    assert.deepEqual(test?.needs, [{ name: 'lint', runOn: ['success'] }, { name: '__build__ci', runOn: ['success'] }]);
    assert.deepEqual(never?.needs, [], 'a job that fails at once does not wait for the build');
  });

  it('plans no build without the option', () => {
    assert.deepEqual(keysOf(workflow([job('lint')], { contentHash: 'a'.repeat(64) })), ['lint']);
  });
});
