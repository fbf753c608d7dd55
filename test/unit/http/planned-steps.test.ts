import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { withPlannedSteps } from '../../../src/http/planned-steps.ts';

const source = {
  repository: 'acme/app',
  ref: 'refs/heads/main',
  workflow: {
    name: 'ci',
    jobs: [
      {
        _type: 'static',
        name: 'build',
        needs: [],
        steps: [
          { name: 'compile', hasOutputs: false },
          { kind: 'parallel', name: 'checks', failFast: true, children: [{ name: 'lint', hasOutputs: false }, { name: 'types', hasOutputs: false }] },
          { name: 'package', hasOutputs: false },
        ],
      },
    ],
  },
};
const reported = (index: number, name: string, status: string) => ({ index, name, status, hook: null, durationMs: 5, exitCode: 1, error: null });

describe('a job’s steps in the API: the ones that never started are listed', () => {
  it('after a failure, the unreported steps of the lock file follow as not_run, numbered as the agent numbers them (a parallel group’s children in turn)', () => {
    const [job] = withPlannedSteps([{ job_key: 'build', status: 'failed', steps: [reported(0, 'compile', 'failed')] }], source);
    assert.deepEqual(
      (job?.steps as { index: number; name: string; status: string }[]).map((s) => [s.index, s.name, s.status]),
      [[0, 'compile', 'failed'], [1, 'lint', 'not_run'], [2, 'types', 'not_run'], [3, 'package', 'not_run']],
    );
  });

  it('while the job runs they are pending; a matrix child is matched by its base name; an init job or a run without its source is left alone', () => {
    const [running, child, init] = withPlannedSteps(
      [
        { job_key: 'build', status: 'running', steps: [reported(0, 'compile', 'running')] },
        { job_key: 'build (1)', status: 'queued', steps: [] },
        { job_key: '__init__ci__build', status: 'failed', steps: [] },
      ],
      source,
    );
    assert.deepEqual((running?.steps as { status: string }[]).map((s) => s.status), ['running', 'pending', 'pending', 'pending']);
    assert.equal((child?.steps as unknown[]).length, 4);
    assert.deepEqual(init?.steps, []);
    assert.deepEqual(withPlannedSteps([{ job_key: 'build', status: 'failed', steps: [] }], null)[0]?.steps, []);
  });
});
