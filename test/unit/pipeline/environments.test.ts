import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { LockWorkflow } from '../../../machines/lock.types.ts';
import type { EnvironmentRecord } from '../../../src/db/environments.ts';
import { SECURITY_HOLD_MS, environmentNamesOf, verdictOf } from '../../../src/pipeline/environments.ts';

const PROD: EnvironmentRecord = {
  ...{ name: 'prod', repositories: [], branches: [], minimumTrust: null, approvalRequired: false, approvers: null },
  ...{ holdExpirySeconds: 86_400, allowLocalExecution: false, variables: {}, createdAt: 0, updatedAt: 0 },
};
const MAIN = { repository: 'acme/app', ref: 'refs/heads/main', trustTier: 'trusted' as const };

describe('environment verdicts (ENV-2)', () => {
  it('an environment with no rules passes', () => {
    assert.deepEqual(verdictOf(PROD, MAIN), { kind: 'pass' });
  });

  it('bound repositories and branch globs fail the job, naming what did not match', () => {
    assert.deepEqual(verdictOf({ ...PROD, repositories: ['acme/site'] }, MAIN), {
      kind: 'fail',
      message: 'environment prod is not bound to repository acme/app (bound: acme/site)',
    });
    const branches = { ...PROD, branches: ['main', 'release/*'] };
    assert.equal(verdictOf(branches, { ...MAIN, ref: 'refs/heads/release/1.2' }).kind, 'pass');
    assert.deepEqual(verdictOf(branches, { ...MAIN, ref: 'refs/heads/release/1.2/hotfix' }), {
      kind: 'fail',
      message: 'branch release/1.2/hotfix does not match the branches of environment prod (main, release/*)',
    });
    assert.equal(verdictOf({ ...PROD, branches: ['refs/tags/v*'] }, { ...MAIN, ref: 'refs/tags/v1.0' }).kind, 'pass', 'a tag ref is matched as written');
  });

  it('a tier below minimumTrust is a 72 h security hold, ahead of an approval requirement; a missing tier counts as unknown', () => {
    const guarded = { ...PROD, minimumTrust: 'known' as const, approvalRequired: true, approvers: 'ops' };
    assert.deepEqual(verdictOf(guarded, { ...MAIN, trustTier: 'unknown' }), {
      kind: 'hold',
      hold: { environment: 'prod', kind: 'security', expiresInMs: SECURITY_HOLD_MS, why: 'trust tier unknown is below the minimum known' },
    });
    assert.equal(verdictOf(guarded, { ...MAIN, trustTier: undefined }).kind, 'hold');
    assert.deepEqual(verdictOf(guarded, { ...MAIN, trustTier: 'known' }), {
      kind: 'hold',
      hold: { environment: 'prod', kind: 'approval', expiresInMs: 86_400_000, why: 'approval required (approvers: ops)' },
    });
    assert.equal(verdictOf({ ...PROD, minimumTrust: 'known' }, { ...MAIN, trustTier: 'trusted' }).kind, 'pass');
  });

  it('a job names the last non-empty environment of its list; an inline one by its result; one left to an init job names none yet', () => {
    const workflow = {
      name: 'w',
      jobs: [
        { _type: 'static', name: 'a', needs: [], steps: [], environments: [{ value: 'qa', dynamic: false }, { value: 'prod', dynamic: false }, { value: '', dynamic: false }] },
        { _type: 'static', name: 'b', needs: [], steps: [], environments: [{ value: { _type: 'inline', expression: '() => "x"' }, dynamic: false }] },
        { _type: 'static', name: 'c', needs: [], steps: [], environments: [{ value: '', dynamic: true }] },
        { _type: 'static', name: 'd', needs: [], steps: [] },
      ],
    } as unknown as LockWorkflow;
    assert.deepEqual(environmentNamesOf(workflow, { b: { 0: 'staging' } }), { a: 'prod', b: 'staging' });
  });
});
