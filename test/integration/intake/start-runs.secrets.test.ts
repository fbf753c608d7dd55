import assert from 'node:assert/strict';
import { it } from 'node:test';
import type { LockFile, LockWorkflow } from '../../../machines/lock.types.ts';
import { DEFAULT_JOB_TIMEOUTS } from '../../../machines/types.ts';
import type { Delivery } from '../../../src/db/deliveries.ts';
import { upsertSecret } from '../../../src/db/secrets.ts';
import type { SourceBase } from '../../../src/pipeline/run-source.ts';
import { runIdFor } from '../../../src/pipeline/run-id.ts';
import { createRunStarter } from '../../../src/pipeline/start-runs.ts';
import { IsolatedVmSandbox } from '../../../src/sandbox/index.ts';
import { unresolvedReferences } from '../../../src/secrets/references.ts';
import { describeEachKind, testLog, withTestDatabase } from '../../support/database.ts';
import { startTestRuntime } from '../../support/runtime.ts';
import * as gh from '../../unit/pipeline/github-payloads.ts';
import { github } from '../../unit/pipeline/trigger-helpers.ts';

// SEC-2 at run creation: a workflow whose registries or install environment name a secret nobody
// stored is a failed run (secret_resolution), not a job that fails later or runs without it.

const workflow = (name: string, refs: { registries?: string[]; installEnv?: string[] }): LockWorkflow =>
  ({
    name,
    triggers: [{ _type: 'push', branches: [{ type: 'glob', pattern: 'main' }], paths: [] }],
    jobs: [{ _type: 'static', name: 'build', needs: [], steps: [{ name: 's', hasOutputs: false, run: 'true' }] }],
    ...(refs.registries && { registries: refs.registries.map((tokenSecret) => ({ url: 'https://npm.example.test/', tokenSecret })) }),
    ...(refs.installEnv && { installEnv: refs.installEnv }),
  }) as unknown as LockWorkflow;
const delivery: Delivery = { source: 'github', deliveryId: 'd-sec', eventName: 'push', headers: {}, body: Buffer.from('{}'), receivedAt: 0, status: 'processing', attempts: 0 };
const source: SourceBase = { repository: 'acme/app', repoUrl: null, ref: 'refs/heads/main', sha: 'a'.repeat(40), provider: 'local', event: github('push', gh.push('refs/heads/main')), trustTier: 'trusted', lockFileSource: 'event' };

await describeEachKind('secret references checked when a run is created', (kind) => {
  it('a reference no scope of the repository answers fails the run with secret_resolution; answered ones start', () =>
    withTestDatabase(kind, async ({ db }) => {
      const runtime = await startTestRuntime(db, 'coord-sec');
      const sandbox = new IsolatedVmSandbox();
      const stored = (scope: string, key: string) => upsertSecret(db, { scope, key, ciphertext: 'c2VhbGVk', keyVersion: 'test', now: Date.now() });
      await stored('repo:acme/app/env:prod', 'NPM_TOKEN');
      await stored('org:acme', 'SENTRY_DSN');
      await stored('repo:other/app', 'MISPLACED');
      try {
        const starter = createRunStarter({
          ...{ db, createRun: (run) => runtime.supervisor.createRun(run), sandbox, timeouts: DEFAULT_JOB_TIMEOUTS, maxAttempts: 5, now: Date.now, log: testLog },
          unresolvedSecrets: (repository, wf) => unresolvedReferences(db, repository, wf),
        });
        const lock = {
          schemaVersion: 29,
          workflows: [
            workflow('answered', { registries: ['prod:NPM_TOKEN'], installEnv: [':SENTRY_DSN'] }),
            workflow('missing', { registries: ['staging:NPM_TOKEN'], installEnv: ['prod:MISPLACED'] }),
          ],
        } as unknown as LockFile;
        const started = await starter.matched(delivery, lock, source);
        assert.deepEqual(started.map((r) => r.workflow), ['answered', 'missing']);
        const runs = await db.selectFrom('runs').select(['run_id', 'status', 'init_failure']).execute();
        const byId = new Map(runs.map((r) => [r.run_id, r]));
        assert.notEqual(byId.get(runIdFor('github', 'd-sec', 'answered'))?.status, 'failed');
        const missing = byId.get(runIdFor('github', 'd-sec', 'missing'));
        assert.equal(missing?.status, 'failed');
        assert.deepEqual(missing?.init_failure, {
          scope: 'run',
          category: 'secret_resolution',
          message: 'secrets the workflow references are not stored: staging:NPM_TOKEN, prod:MISPLACED',
        });
      } finally {
        sandbox.dispose();
        await runtime.stop();
      }
    }));
});
