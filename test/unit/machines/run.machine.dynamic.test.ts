import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { InitFlags } from '../../../machines/types.ts';
import { RUN_ON, RunHarness, jobPlan, need, status } from '../../support/machines.ts';
import type { RecordedIntent } from '../../support/machines.ts';

const FLAGS: InitFlags = { dynamicEnvironment: false, dynamicEnv: false, dynamicConcurrencyGroup: false, dynamicMatrix: false };
const SCOPE = { repository: 'acme/app', policy: { cancelInProgress: false, max: 1 } };

function initPlan(target: string, flags: Partial<InitFlags>) {
  const key = `__init__ci__${target}`;
  return jobPlan(key, { initFor: { targetJobName: target, flags: { ...FLAGS, ...flags } } });
}

function placed(intents: readonly RecordedIntent[]): string[] {
  return intents.filter((i) => i.type === 'requestPlacement').map((i) => i.by);
}

describe('run machine: needs carry upstream statuses and outputs (DAG-4)', () => {
  it('a downstream is released with its direct upstreams: a failed probe reads failed, outputs by job and step', () => {
    const h = RunHarness.start([
      jobPlan('probe'),
      jobPlan('setup'),
      jobPlan('report', { needs: [need('probe', RUN_ON.always), need('setup')] }),
    ]).watchDag7();
    h.runToEnd('probe', 'failed', 10, { stepResults: [{ name: 'fail', status: 'failed', durationMs: 8, error: 'exit code: 1' }] });
    h.runToEnd('setup', 'success', 20, { outputs: { make: { version: '1.2.3' } } });
    assert.equal(h.jobState('report'), 'queued');
    assert.deepEqual(h.child('report').context.upstream, {
      statuses: { probe: 'failed', setup: 'success' },
      outputs: { setup: { make: { version: '1.2.3' } } },
    });
    assert.deepEqual(h.snapshot.context.jobs['setup']?.outputs, { make: { version: '1.2.3' } });
  });

  it('a need on a fan-out carries every child and the aggregate under the base name', () => {
    const h = RunHarness.start([
      jobPlan('t (a)', { baseName: 't', fanoutIndex: 0, fanoutTotal: 2 }),
      jobPlan('t (b)', { baseName: 't', fanoutIndex: 1, fanoutTotal: 2 }),
      jobPlan('after', { needs: [need('t', RUN_ON.always)] }),
    ]).watchDag7();
    h.runToEnd('t (a)', 'success', 10, { outputs: { s: { n: 1 } } });
    h.runToEnd('t (b)', 'failed', 20, { outputs: { s: { n: 2 } } });
    assert.deepEqual(h.child('after').context.upstream, {
      statuses: { 't (a)': 'success', 't (b)': 'failed', t: 'failed' },
      outputs: { 't (a)': { s: { n: 1 } }, 't (b)': { s: { n: 2 } }, t: { s: { n: 2 } } },
    });
  });

  it('a root job carries no upstream', () => {
    const h = RunHarness.start([jobPlan('a')]);
    assert.equal(h.child('a').context.upstream, null);
  });
});

describe('run machine: init jobs (lockfile.md §7, DAG-6)', () => {
  it('the target waits for its init job, then is released with the env, environment and concurrency group it resolved', () => {
    const h = RunHarness.start(
      [initPlan('deploy', { dynamicEnv: true, dynamicConcurrencyGroup: true, dynamicEnvironment: true }), jobPlan('deploy', { initJob: '__init__ci__deploy' })],
      { concurrencyScope: SCOPE },
    ).watchDag7();
    assert.deepEqual(h.jobStates(), { __init__ci__deploy: 'queued', deploy: 'waiting.gated' });
    assert.deepEqual(h.child('deploy').context.waiting, { kind: 'needs', message: 'waiting for upstream jobs: init job __init__ci__deploy' });
    assert.deepEqual(placed(h.take()), ['__init__ci__deploy']);
    h.runToEnd('__init__ci__deploy', 'success', 10, {
      initResult: { env: { DEPLOY_TARGET: 'prod' }, environmentNames: ['staging', 'production', ''], concurrencyGroup: 'deploy-main' },
    });
    const deploy = h.child('deploy').context;
    assert.deepEqual(deploy.resolved, { env: { DEPLOY_TARGET: 'prod' }, environment: 'production' });
    assert.deepEqual(deploy.concurrency, { key: 'acme/app::deploy-main', policy: SCOPE.policy });
    assert.equal(h.jobState('deploy'), 'waiting.concurrency');
    assert.deepEqual(h.take().filter((i) => i.type === 'requestConcurrency').map((i) => i.params), [
      { jobKey: 'deploy', key: 'acme/app::deploy-main', policy: SCOPE.policy },
    ]);
  });

  it('a failed init job fails its target with dynamic_eval and the downstream is skipped; the run fails', () => {
    const h = RunHarness.start([
      initPlan('deploy', { dynamicEnv: true }),
      jobPlan('deploy', { initJob: '__init__ci__deploy' }),
      jobPlan('notify', { needs: [need('deploy')] }),
    ]).watchDag7();
    h.dispatch('__init__ci__deploy', 10);
    h.fromOwner('__init__ci__deploy', (o) => status('running', 11, o));
    h.fromOwner('__init__ci__deploy', (o) => status('failed', 12, o, 'External API down'));
    assert.equal(h.jobState('deploy'), 'failed');
    assert.deepEqual(h.child('deploy').context.initFailure, {
      scope: 'job',
      category: 'dynamic_eval',
      message: 'init job __init__ci__deploy ended failed: External API down',
      jobName: 'deploy',
    });
    assert.equal(h.jobState('notify'), 'skipped');
    assert.equal(h.snapshot.value, 'failed');
    assert.equal(h.snapshot.context.failureReason, 'Failed jobs: __init__ci__deploy, deploy');
  });

  it('a target that also needs an upstream waits for both, and is released once both are done', () => {
    const h = RunHarness.start([jobPlan('build'), initPlan('deploy', { dynamicEnv: true }), jobPlan('deploy', { initJob: '__init__ci__deploy', needs: [need('build')] })]).watchDag7();
    assert.match(h.child('deploy').context.waiting?.message ?? '', /build, init job __init__ci__deploy/);
    h.runToEnd('__init__ci__deploy', 'success', 10, { initResult: { env: { A: '1' } } });
    assert.deepEqual(h.child('deploy').context.waiting, { kind: 'needs', message: 'waiting for upstream jobs: build' });
    h.runToEnd('build', 'success', 20);
    assert.equal(h.jobState('deploy'), 'queued');
    assert.deepEqual(h.child('deploy').context.resolved, { env: { A: '1' } });
  });
});

describe('run machine: a dynamic matrix fans out from its init job (no hang on needs after it)', () => {
  const plans = () => [
    initPlan('test', { dynamicMatrix: true }),
    jobPlan('test', { initJob: '__init__ci__test', template: true, maxParallel: 1 }),
    jobPlan('deploy', { needs: [need('test')] }),
  ];

  it('children are spawned from matrixValues; the downstream on the base name waits for all of them', () => {
    const h = RunHarness.start(plans()).watchDag7();
    assert.deepEqual(h.jobStates(), { __init__ci__test: 'queued', test: 'template.pending', deploy: 'waiting.gated' });
    h.runToEnd('__init__ci__test', 'success', 10, { initResult: { matrixValues: [{ os: 'linux' }, { os: 'mac' }] } });
    assert.deepEqual(h.jobStates(), {
      __init__ci__test: 'success',
      deploy: 'waiting.gated',
      'test (linux)': 'queued',
      'test (mac)': 'waiting.gated',
    });
    assert.deepEqual(h.child('test (mac)').context.waiting?.kind, 'wave');
    assert.deepEqual(h.child('test (linux)').context.spec.matrix, { values: { os: 'linux' }, index: 0, total: 2 });
    assert.deepEqual(h.snapshot.context.templates, {});
    h.runToEnd('test (linux)', 'success', 20);
    assert.equal(h.jobState('test (mac)'), 'queued');
    h.runToEnd('test (mac)', 'success', 30);
    assert.equal(h.jobState('deploy'), 'queued');
    assert.deepEqual(h.child('deploy').context.upstream?.statuses, { 'test (linux)': 'success', 'test (mac)': 'success', test: 'success' });
    h.runToEnd('deploy', 'success', 40);
    assert.equal(h.snapshot.value, 'success');
  });

  it('the fan-out survives a persist and restore between the init result and the children', () => {
    const h = RunHarness.start(plans());
    h.runToEnd('__init__ci__test', 'success', 10, { initResult: { matrixValues: [{ os: 'linux' }] } });
    const restored = h.restore().watchDag7();
    assert.equal(restored.jobState('test (linux)'), 'queued');
    restored.runToEnd('test (linux)', 'success', 20);
    restored.runToEnd('deploy', 'success', 30);
    assert.equal(restored.snapshot.value, 'success');
  });

  it('zero combinations fail the job with matrix_expansion and skip its downstream', () => {
    const h = RunHarness.start(plans()).watchDag7();
    h.runToEnd('__init__ci__test', 'success', 10, { initResult: { matrixValues: [] } });
    assert.equal(h.jobStates()['test'], 'template.failed');
    assert.equal(h.snapshot.context.jobs['test']?.failure?.category, 'matrix_expansion');
    assert.equal(h.jobState('deploy'), 'skipped');
    assert.equal(h.snapshot.value, 'failed');
  });

  it('a failed init job fails the template with dynamic_eval; cancelling a run ends a pending template', () => {
    const failed = RunHarness.start(plans()).watchDag7();
    failed.runToEnd('__init__ci__test', 'failed', 10);
    assert.equal(failed.snapshot.context.jobs['test']?.failure?.category, 'dynamic_eval');
    assert.equal(failed.jobState('deploy'), 'skipped');
    assert.equal(failed.snapshot.value, 'failed');

    const cancelled = RunHarness.start(plans());
    cancelled.send({ type: 'run.cancel', reason: 'stop', force: false, by: 'test', at: 5 });
    assert.equal(cancelled.jobStates()['test'], 'template.cancelled');
    assert.equal(cancelled.snapshot.value, 'cancelled');
  });
});
