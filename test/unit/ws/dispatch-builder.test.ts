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
