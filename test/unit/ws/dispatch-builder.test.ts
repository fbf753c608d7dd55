import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { LockWorkflow } from '../../../machines/lock.types.ts';
import type { RunSource } from '../../../src/pipeline/run-source.ts';
import { buildDispatch } from '../../../src/ws/dispatch-builder.ts';
import type { DispatchTarget } from '../../../actors/agents/effects.ts';

const workflow = {
  name: 'ci',
  triggers: [{ _type: 'push', branches: [], paths: [] }],
  jobs: [{ _type: 'static', name: 'build', needs: [], steps: [{ name: 'make', hasOutputs: false, run: 'make' }] }],
} as unknown as LockWorkflow;

const target: DispatchTarget = {
  ...{ runId: 'run-1', jobKey: 'build', dispatchId: '5b0f6c2e-8a3d-4d7e-9f1a-2c3b4d5e6f70', agentLabels: ['linux'] },
  job: { baseName: 'build', matrix: null, initFor: null, upstream: null, resolved: null },
};

function sourceWith(trustTier: RunSource['trustTier']): RunSource {
  return {
    ...{ repository: 'acme/app', repoUrl: 'file:///srv/app', ref: 'main', sha: 'a'.repeat(40), provider: 'local', event: null, workflow },
    ...(trustTier && { trustTier }),
  };
}

function cacheRefScopeFor(trustTier: RunSource['trustTier']): unknown {
  const built = buildDispatch(sourceWith(trustTier), target, 0);
  assert.ok(built.ok, built.ok ? '' : built.reason);
  return (built.dispatch as { cacheRefScope?: unknown }).cacheRefScope;
}

describe('job.dispatch built from a run source', () => {
  it('TRUST-5: build caches are shared between trusted refs only; a run stored without a tier leaves the agent its default (isolated)', () => {
    assert.equal(cacheRefScopeFor('trusted'), 'shared');
    assert.equal(cacheRefScopeFor('known'), 'isolated');
    assert.equal(cacheRefScopeFor('unknown'), 'isolated');
    assert.equal(cacheRefScopeFor(undefined), undefined, 'absent, not null');
  });
});

describe('job.dispatch of a build job', () => {
  const source = { ...sourceWith('trusted'), workflow: { ...workflow, contentHash: 'c'.repeat(64), source: { file: '.kici/workflows/ci.ts', export: '#default' } }, lockfileHash: 'd'.repeat(64) };
  const buildTarget: DispatchTarget = { ...target, jobKey: '__build__ci', agentLabels: ['kici:role:builder', 'kici:os:darwin', 'kici:arch:arm64'], job: { ...target.job, baseName: '__build__ci' } };

  it('asks the agent to build the source and dependencies for its own platform, as the stock agent reads it', () => {
    const built = buildDispatch(source, buildTarget, 0);
    assert.ok(built.ok, built.ok ? '' : built.reason);
    assert.deepEqual(built.dispatch.jobConfig, {
      ...{ buildOnly: true, workflowName: 'ci', targetPlatform: 'darwin', targetArch: 'arm64', source: { file: '.kici/workflows/ci.ts' } },
      ...{ contentHash: 'c'.repeat(64), lockfileHash: 'd'.repeat(64), buildSourceNeeded: true, buildDepsNeeded: true },
    });
  });

  it('a job that waited for the build is not told about it in its upstream results', () => {
    const upstream = { statuses: { __build__ci: 'success', lint: 'success' }, outputs: { __build__ci: {}, lint: { ok: 'yes' } } };
    const built = buildDispatch(source, { ...target, job: { ...target.job, upstream } } as DispatchTarget, 0);
    assert.ok(built.ok, built.ok ? '' : built.reason);
    assert.deepEqual([built.dispatch.upstreamJobStatuses, built.dispatch.upstreamJobOutputs], [{ lint: 'success' }, { lint: { ok: 'yes' } }]);
  });
});
