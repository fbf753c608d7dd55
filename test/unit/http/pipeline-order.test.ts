import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { inPipelineOrder } from '../../../src/http/pipeline-order.ts';

const job = (name: string, needs: unknown[] = []) => ({ _type: 'static', name, needs, runsOn: [], steps: [] });
const source = (jobs: object[], name = 'ci') => ({ repository: 'acme/app', ref: 'main', sha: 'abc', workflow: { name, jobs } });
const rows = (...keys: string[]) => keys.map((job_key) => ({ job_key, status: 'pending' }));
const order = (jobs: { job_key: string; needs: string[]; stage: number }[]) => jobs.map((j) => [j.job_key, j.stage, j.needs.join('+')]);

describe('jobs in pipeline order (src/http/pipeline-order.ts)', () => {
  it('a job comes after what it needs, not by its name: lint, test, deploy, each with its needs', () => {
    const summary = source([job('deploy', ['test']), job('lint'), job('test', [{ name: 'lint', runOn: ['success', 'failed'] }])]);
    assert.deepEqual(order(inPipelineOrder(rows('deploy', 'lint', 'test'), summary)), [
      ['lint', 0, ''],
      ['test', 1, 'lint'],
      ['deploy', 2, 'test'],
    ]);
  });

  it('jobs of one stage by name; matrix children with their job; the build job first, needed by all; an init job before its job', () => {
    const summary = source([job('b'), job('a'), job('shard', ['a']), job('deploy', ['shard'])]);
    const ordered = inPipelineOrder(rows('deploy', 'shard (n=2)', 'shard (n=1)', 'b', 'a', '__init__ci__deploy', '__build__ci'), summary);
    assert.deepEqual(order(ordered), [
      ['__build__ci', 0, ''],
      ['a', 1, '__build__ci'],
      ['b', 1, '__build__ci'],
      ['shard (n=1)', 2, '__build__ci+a'],
      ['shard (n=2)', 2, '__build__ci+a'],
      ['__init__ci__deploy', 3, '__build__ci+shard'],
      ['deploy', 4, '__build__ci+__init__ci__deploy+shard'],
    ]);
  });

  it('rows of a run without a stored source keep their order, needing nothing', () => {
    assert.deepEqual(order(inPipelineOrder(rows('b', 'a'), { note: 'no workflow' })), [
      ['b', 0, ''],
      ['a', 0, ''],
    ]);
  });
});
