import assert from 'node:assert/strict';
import { it } from 'node:test';
import type { LockFile, LockWorkflow } from '../../../machines/lock.types.ts';
import { DEFAULT_JOB_TIMEOUTS } from '../../../machines/types.ts';
import type { Delivery } from '../../../src/db/deliveries.ts';
import { putEnvironment } from '../../../src/db/environments.ts';
import type { EnvironmentSettings } from '../../../src/db/environments.ts';
import type { SourceBase } from '../../../src/pipeline/run-source.ts';
import { runIdFor } from '../../../src/pipeline/run-id.ts';
import { createRunStarter } from '../../../src/pipeline/start-runs.ts';
import { IsolatedVmSandbox } from '../../../src/sandbox/index.ts';
import { describeEachKind, testLog, withTestDatabase } from '../../support/database.ts';
import { eventually, startTestRuntime } from '../../support/runtime.ts';
import * as gh from '../../unit/pipeline/github-payloads.ts';
import { github } from '../../unit/pipeline/trigger-helpers.ts';

const PROD: EnvironmentSettings = {
  ...{ name: 'prod', repositories: [], branches: [], minimumTrust: 'trusted', approvalRequired: false, approvers: null },
  ...{ holdExpirySeconds: 3600, allowLocalExecution: false },
};

/** `deploy` names prod through an inline value: evaluated against the event when the run is created. */
const workflow = {
  name: 'release',
  triggers: [{ _type: 'push', branches: [{ type: 'glob', pattern: 'main' }], paths: [] }],
  jobs: [
    {
      _type: 'static',
      name: 'deploy',
      needs: [],
      runsOn: [{ kind: 'exact', value: 'nobody-has-this' }],
      environments: [{ value: { _type: 'inline', expression: '(event) => event.targetBranch === "main" ? "prod" : "qa"' }, dynamic: false }],
      steps: [{ name: 's', hasOutputs: false, run: 'true' }],
    },
  ],
} as unknown as LockWorkflow;
const lock = { schemaVersion: 29, workflows: [workflow] } as unknown as LockFile;
const source = (trustTier: SourceBase['trustTier']): SourceBase => ({
  ...{ repository: 'acme/app', repoUrl: null, ref: 'refs/heads/main', sha: 'a'.repeat(40), provider: 'github' },
  ...{ event: github('push', gh.push('refs/heads/main')), trustTier, lockFileSource: 'event' },
});
const delivery = (id: string): Delivery => ({ source: 'github', deliveryId: id, eventName: 'push', headers: {}, body: Buffer.from('{}'), receivedAt: 0, status: 'processing', attempts: 1 });

await describeEachKind('webhook runs resolve their environments at creation (ENV-2, ENV-4)', (kind) => {
  it('B13: a run below minimumTrust is held on a 72 h security hold and asks no agent; a missing tier is no pass', () =>
    withTestDatabase(kind, async ({ db }) => {
      await putEnvironment(db, PROD, { REGION: 'eu' }, Date.now());
      const runtime = await startTestRuntime(db, 'coord-e');
      const sandbox = new IsolatedVmSandbox();
      try {
        const starter = createRunStarter({ db, createRun: (run) => runtime.supervisor.createRun(run), sandbox, timeouts: DEFAULT_JOB_TIMEOUTS, maxAttempts: 5, now: Date.now, log: testLog });
        await starter.matched(delivery('untrusted'), lock, source('unknown'));
        await starter.matched(delivery('no-tier'), lock, { ...source('trusted'), trustTier: undefined as unknown as 'unknown' });
        await starter.matched(delivery('trusted'), lock, source('trusted'));
        const jobOf = (id: string) => runtime.supervisor.jobContext(runIdFor('github', id, 'release'), 'deploy');
        for (const id of ['untrusted', 'no-tier']) {
          const held = jobOf(id);
          assert.equal(held?.waiting?.kind, 'approval', `${id}: held`);
          assert.match(held?.waiting?.message ?? '', /^waiting for approval of environment prod \(security hold: trust tier unknown is below the minimum trusted\) \(expires in 72 h\)$/);
          assert.equal(runtime.supervisor.jobHasTag(runIdFor('github', id, 'release'), 'deploy', 'waits-for-agent'), false, `${id}: asks no agent`);
        }
        assert.equal(jobOf('trusted')?.waiting?.kind === 'approval', false, 'a trusted run is not held');
        const gates = await eventually(async () => {
          const rows = await db.selectFrom('approval_gates').selectAll().orderBy('run_id').execute();
          return rows.length === 2 ? rows : null;
        });
        assert.deepEqual(gates.map((g) => [g.environment, g.kind, g.status, Number(g.expires_at) - Number(g.opened_at)]), [
          ['prod', 'security', 'pending', 72 * 3_600_000],
          ['prod', 'security', 'pending', 72 * 3_600_000],
        ]);
        const frozen = await db.selectFrom('runs').select('input_summary').where('run_id', '=', runIdFor('github', 'trusted', 'release')).executeTakeFirstOrThrow();
        assert.deepEqual((frozen.input_summary as { environments: unknown }).environments, {
          byJob: { deploy: 'prod' },
          values: { prod: { variables: { REGION: 'eu' }, allowLocalExecution: false } },
        });
      } finally {
        sandbox.dispose();
        await runtime.stop();
      }
    }));
});
