import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { renderRunDetail, type RunDetail, type RunRow } from '../../../src/cli/run-view.ts';

function detailOf(inputSummary: RunRow['input_summary']): RunDetail {
  const run: RunRow = {
    ...{ run_id: 'run-1', workflow_name: 'ci', repository: 'acme/app', status: 'running', created_at: 0, finished_at: null },
    ...{ failure_reason: null, init_failure: null, input_summary: inputSummary },
  };
  return { run, jobs: [], owner: null, rerunOf: null };
}

const lockLine = (text: string) => text.split('\n').find((line) => line.startsWith('  lock file'));

describe('switchyard run <id>', () => {
  it('TRUST-4: a pull request run from its base commit says so, and whether its own workflow changes were left out', () => {
    const base = { ref: 'feature', sha: 'a'.repeat(40), trustTier: 'known', lockFileSource: 'base' };
    assert.equal(lockLine(renderRunDetail(detailOf({ ...base, workflowChangesIgnored: true }), 0)), "  lock file   read at the base commit (sender known); the pull request's workflow changes were not run");
    assert.equal(lockLine(renderRunDetail(detailOf(base), 0)), '  lock file   read at the base commit (sender known)');
    assert.equal(lockLine(renderRunDetail(detailOf({ ...base, lockFileSource: 'head', trustTier: 'trusted' }), 0)), undefined, 'a run of its own lock file needs no line');
    assert.equal(lockLine(renderRunDetail(detailOf(null), 0)), undefined);
  });
});
