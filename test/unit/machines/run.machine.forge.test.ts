import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { projectJobs } from '../../../machines/projection.ts';
import type { PersistedMachineSnapshot } from '../../../machines/projection.ts';
import type { RunContext } from '../../../machines/run.machine.ts';
import { RUN_ON, RunHarness, jobPlan, need } from '../../support/machines.ts';

const FORGE = { forgeStatus: { context: 'switchyard/ci' } };

/** The commit statuses the run recorded, as `state: description`. */
function statuses(h: RunHarness): string[] {
  return h.intents.filter((i) => i.type === 'reportForgeStatus').map((i) => {
    const params = i.params as { context: string; state: string; description: string };
    assert.equal(i.by, 'run');
    assert.equal(params.context, 'switchyard/ci');
    return `${params.state}: ${params.description}`;
  });
}

describe('run machine: commit status intents', () => {
  it('records pending at creation and success once the run ended success', () => {
    const h = RunHarness.start([jobPlan('build')], FORGE);
    assert.deepEqual(statuses(h), ['pending: Running']);
    h.runToEnd('build', 'success', 10);
    assert.equal(h.snapshot.value, 'success');
    assert.deepEqual(statuses(h), ['pending: Running', 'success: All jobs succeeded']);
  });

  it('a failed run reports failure with its reason; a cancelled one error with the cancel reason', () => {
    const failed = RunHarness.start([jobPlan('build'), jobPlan('test', { needs: [need('build')] })], FORGE);
    failed.runToEnd('build', 'failed', 10);
    assert.deepEqual(statuses(failed), ['pending: Running', 'failure: Failed jobs: build']);

    const cancelled = RunHarness.start([jobPlan('build')], FORGE);
    cancelled.send({ type: 'run.cancel', reason: 'superseded', force: true, by: 'api', at: 5 });
    assert.equal(cancelled.snapshot.value, 'cancelled');
    assert.deepEqual(statuses(cancelled), ['pending: Running', 'error: Cancelled: superseded']);
  });

  it('a run held for approval says so; a run that failed at creation reports its failure alone', () => {
    const held = RunHarness.start([jobPlan('deploy')], { ...FORGE, approval: { timeoutMs: 60_000 } });
    assert.deepEqual(statuses(held), ['pending: Waiting for approval']);
    const broken = RunHarness.start([jobPlan('build')], { ...FORGE, initFailure: { scope: 'run', category: 'lock_resolution', message: 'no lock file' } });
    assert.equal(broken.snapshot.value, 'failed');
    assert.deepEqual(statuses(broken), ['failure: no lock file']);
  });

  it('a description longer than GitHub takes (140) is cut with an ellipsis', () => {
    const h = RunHarness.start([jobPlan('build')], FORGE);
    h.send({ type: 'run.cancel', reason: 'x'.repeat(500), force: true, by: 'api', at: 5 });
    const [, ended] = statuses(h);
    assert.equal(ended?.length, 'error: '.length + 140);
    assert.ok(ended?.endsWith('x…'));
  });

  it('a run without a forge status context records none', () => {
    const h = RunHarness.start([jobPlan('build')]);
    h.runToEnd('build', 'success', 10);
    assert.equal(h.snapshot.value, 'success');
    assert.deepEqual(statuses(h), []);
  });
});

describe('run machine: carried jobs of a failed-only rerun', () => {
  const plans = [jobPlan('build'), jobPlan('test', { needs: [need('build')] }), jobPlan('report', { needs: [need('test', RUN_ON.always)] })];

  it('a carried job has no actor and ended success with its outputs; its dependant is released at once with them', () => {
    const h = RunHarness.start(plans, { carried: { build: { fromRun: 'run-0', outputs: { artifact: 'app.tgz' } } } });
    assert.deepEqual(Object.keys(h.snapshot.children), ['test', 'report']);
    assert.equal(h.jobState('test'), 'queued');
    assert.deepEqual(h.child('test').context.upstream, { statuses: { build: 'success' }, outputs: { build: { artifact: 'app.tgz' } } });
    assert.deepEqual(h.intents.filter((i) => i.type === 'requestPlacement').map((i) => i.by), ['test']);
    const build = projectJobs(h.snapshot as unknown as PersistedMachineSnapshot<RunContext>).find((job) => job.jobKey === 'build');
    assert.deepEqual([build?.status, build?.outcome, build?.outputs], ['success', 'carried over from run run-0', { artifact: 'app.tgz' }]);
    h.runToEnd('test', 'success', 10);
    h.runToEnd('report', 'success', 20);
    assert.equal(h.snapshot.value, 'success');
  });

  it('a failure among the rerun jobs fails the run as usual', () => {
    const h = RunHarness.start(plans, { carried: { build: { fromRun: 'run-0' } } });
    h.runToEnd('test', 'failed', 10);
    h.runToEnd('report', 'success', 20);
    assert.equal(h.snapshot.value, 'failed');
    assert.equal(h.snapshot.context.failureReason, 'Failed jobs: test');
  });
});
