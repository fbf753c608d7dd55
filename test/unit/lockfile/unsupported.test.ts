import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { LockWorkflow } from '../../../machines/lock.types.ts';
import { unsupportedParts } from '../../../src/lockfile/unsupported.ts';

const job = (name: string, fields: object = {}) => ({ _type: 'static', name, needs: [], steps: [{ name: 'build', hasOutputs: false }], ...fields });
const workflow = (fields: object, jobs: object[]): LockWorkflow => ({ name: 'ci', jobs, ...fields }) as LockWorkflow;

describe('lock-file parts Switchyard accepts but does not do are named on the run', () => {
  it('a workflow using none gets no line', () => {
    const supported = { concurrency: { hasGroup: true }, timeout: 60_000, registries: [{ url: 'https://npm.example', tokenSecret: 'prod:npm' }], installEnv: ['prod:TOKEN'] };
    assert.deepEqual(unsupportedParts(workflow(supported, [job('build', { environments: [], gracePeriod: 5, rules: [] })])), []);
  });

  it('names each: workflow rules and hooks, job approval, container, cache, group needs, step approvals', () => {
    const lines = unsupportedParts(
      workflow({ rules: [{ _type: 'dynamic', label: 'only-main', source: { file: 'ci.ts', index: 0 } }], registries: [{ url: 'https://npm.example', tokenSecret: 'prod:npm' }], hasOnFailure: true, hasCleanup: true, hasOnCancel: false }, [
        job('deploy', { approval: { timeoutSeconds: 60 }, container: { image: 'node:24' }, cache: [{ key: 'deps' }] }),
        job('report', { needs: [{ group: 'gen', runOn: ['success'] }], steps: [{ kind: 'parallel', name: 'p', failFast: true, children: [{ name: 'sign', hasOutputs: false, approval: { message: 'ok?' } }] }] }),
      ]),
    );
    assert.deepEqual(lines, [
      "workflow ci: `rules` is not supported here and was ignored (a job's own rules are sent to its agent)",
      'workflow ci: its onFailure, cleanup hooks are not run here',
      "job deploy: `approval` is not supported here and was ignored: the job is not held (an environment with required reviewers holds it)",
      "job deploy: `container` is not supported here and was ignored: steps run on the agent's host (a container scaler backend runs the whole agent in one)",
      'job deploy: `cache` is not supported here and was ignored (declarative caches)',
      'job report: needs on group gen are treated as met (generators are not run here)',
      "job report, step sign: step approvals are not supported here; the stock agent's request is rejected",
    ]);
  });
});
