import assert from 'node:assert/strict';
import { it } from 'node:test';
import { pino } from 'pino';
import type { Delivery } from '../../../src/db/deliveries.ts';
import { LockFileCache } from '../../../src/lockfile/cache.ts';
import { runPipeline } from '../../../src/pipeline/pipeline.ts';
import { createLockRepo, lockFileWith, pushWorkflow } from '../../support/lock-repo.ts';
import { pushPayload } from '../../support/webhooks.ts';

it('trigger types Switchyard never matches are logged once per lock file, with the repository and commit', async () => {
  const repo = await createLockRepo();
  const chained = { ...pushWorkflow('after-ci', []), triggers: [{ _type: 'workflow_complete', name: 'ci' }, { _type: 'lifecycle', events: ['job_failed'] }] };
  const sha = repo.commit({ '.kici/kici.lock.json': lockFileWith([pushWorkflow('ci', []), chained]) });
  const records: Record<string, unknown>[] = [];
  const log = pino({ level: 'info' }, { write: (line: string) => records.push(JSON.parse(line) as Record<string, unknown>) });
  const registration = { name: 'acme/app', provider: 'local' as const, path: repo.path, cloneUrl: null, defaultBranch: null, token: null };
  const startRuns = { matched: () => Promise.resolve([]), corrupt: () => Promise.resolve([]) };
  const deps = { repository: () => Promise.resolve(registration), genericSourceRepository: () => Promise.resolve(null), cache: new LockFileCache(), startRuns, log };
  const delivery = (deliveryId: string): Delivery => ({ source: 'github', deliveryId, eventName: 'push', headers: {}, body: Buffer.from(JSON.stringify(pushPayload(sha))), receivedAt: 0, status: 'processing', attempts: 0 });
  try {
    await runPipeline(deps, delivery('d-1'));
    await runPipeline(deps, delivery('d-2'));
    const logged = records.filter((r) => r['msg'] === 'the lock file has trigger types Switchyard never matches');
    assert.equal(logged.length, 1, 'the second delivery of the same lock file logs nothing');
    assert.deepEqual([logged[0]?.['repository'], logged[0]?.['sha'], logged[0]?.['types']], ['acme/app', sha, ['workflow_complete', 'lifecycle']]);
  } finally {
    repo.remove();
  }
});
