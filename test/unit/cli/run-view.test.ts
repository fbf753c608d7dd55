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

describe('switchyard run <id>: jobs and steps', () => {
  const job = (fields: Partial<RunDetail['jobs'][number]>): RunDetail['jobs'][number] => ({
    ...{ job_key: 'build', status: 'failed', attempt: 1, agent_id: 'agent-1', duration_ms: 1200, waiting_reason: null, init_failure: null },
    ...{ outcome: null, steps: [], outputs: null },
    ...fields,
  });
  const step = (index: number, name: string, status: 'failed' | 'not_run', error: string | null = null) => ({ index, name, status, hook: null, durationMs: null, exitCode: null, error });

  // Regression: an error starting with a newline left its cell blank; steps that never started were not shown.
  it('an error is one line in its cell, and a step that never ran reads "not run"', () => {
    const text = renderRunDetail({ ...detailOf(null), jobs: [job({ steps: [step(0, 'compile', 'failed', '\nerror: missing semicolon\n  at main.c:3'), step(1, 'test', 'not_run')] })] }, 0);
    const lines = text.split('\n');
    assert.ok(lines.some((line) => /^\s+0\s+compile\s+failed\s+-\s+-\s+error: missing semicolon at main\.c:3$/.test(line)), text);
    assert.ok(lines.some((line) => /^\s+1\s+test\s+not run\b/.test(line)), text);
  });

  it('a skipped job says why it was skipped', () => {
    const text = renderRunDetail({ ...detailOf(null), jobs: [job({ status: 'skipped', attempt: 0, agent_id: null, outcome: 'upstream build ended failed; this job runs on success' })] }, 0);
    assert.match(text, /\n {2}skipped: upstream build ended failed; this job runs on success\n/);
  });
});

describe('switchyard run <id>: provenance', () => {
  it('lists each attestation with its subject, digest, job and bundle number', () => {
    const digest = 'ab'.repeat(32);
    const text = renderRunDetail({ ...detailOf(null), attestations: [{ id: 7, jobKey: 'release', subjectName: 'app.tgz', subjectDigest: digest }] }, 0);
    assert.ok(text.includes(`  provenance  app.tgz sha256:${digest} (job release, bundle #7)`), text);
  });
});

describe('switchyard run <id>: emitted events', () => {
  it('says which event started the run and where each event it emitted went', () => {
    const text = renderRunDetail({
      ...detailOf(null),
      triggeredBy: { eventName: 'built', runId: 'run-0', jobKey: 'build', repository: 'acme/lib' },
      emittedEvents: [
        {
          eventName: 'deployed',
          jobKey: 'deploy',
          deliveries: [
            { repository: 'acme/app', status: 'processed', runIds: ['run-2'], reason: null },
            { repository: 'acme/docs', status: 'ignored', runIds: [], reason: 'repository acme/docs is not registered' },
          ],
        },
      ],
    }, 0);
    assert.ok(text.includes('  started by  event built of run run-0 (job build, acme/lib)'), text);
    assert.ok(text.includes('  emitted     deployed (job deploy) → acme/app: started run-2'), text);
    assert.ok(text.includes('  emitted     deployed (job deploy) → acme/docs: ignored: repository acme/docs is not registered'), text);
  });
});
