import assert from 'node:assert/strict';
import { it } from 'node:test';
import type { Kysely } from 'kysely';
import { pino } from 'pino';
import { DEFAULT_JOB_TIMEOUTS } from '../../../machines/types.ts';
import { claimDueDeliveries, deliveryRecorder, type DeliveryKey } from '../../../src/db/deliveries.ts';
import { deleteRepository, getRepository, listRepositories, upsertRepository } from '../../../src/db/repositories.ts';
import type { Schema } from '../../../src/db/schema.ts';
import { LockFileCache } from '../../../src/lockfile/cache.ts';
import { createDeliveryProcessor } from '../../../src/pipeline/deliveries.ts';
import { providerFor } from '../../../src/pipeline/pipeline.ts';
import { ScheduleClock } from '../../../src/pipeline/schedule-clock.ts';
import { createRunStarter } from '../../../src/pipeline/start-runs.ts';
import { IsolatedVmSandbox } from '../../../src/sandbox/index.ts';
import { describeEachKind, testLog, withTestDatabase } from '../../support/database.ts';
import { createLockRepo, lockFileWith, pushWorkflow, runJob } from '../../support/lock-repo.ts';
import { startTestRuntime } from '../../support/runtime.ts';

const scheduled = (name: string, cronExpression: string, timezone = 'UTC') => ({
  ...pushWorkflow(name, [runJob('only', ['true'])]),
  triggers: [{ _type: 'schedule', cronExpression, timezone }],
});
const LOCK = lockFileWith([
  scheduled('nightly', '0 3 * * *'),
  scheduled('new-york', '0 3 * * *', 'America/New_York'),
  scheduled('broken', '0 3 * *'),
  pushWorkflow('on-push', [runJob('only', ['true'])]),
]);
const at = (iso: string) => Date.parse(iso);

/** A coordinator's schedule clock over a real database and a real repository; warnings are kept. */
function clockOn(db: Kysely<Schema>, now: { value: number }) {
  const warnings: Record<string, unknown>[] = [];
  const log = pino({ level: 'warn' }, { write: (line: string) => warnings.push(JSON.parse(line) as Record<string, unknown>) });
  const notified: DeliveryKey[] = [];
  const clock = new ScheduleClock({
    ...{ repositories: () => listRepositories(db), providerFor: (repo) => providerFor(repo, undefined), cache: new LockFileCache(), record: deliveryRecorder(db) },
    ...{ notify: (key) => notified.push(key), now: () => now.value, log },
  });
  return { clock, warnings, notified };
}

await describeEachKind('schedule triggers fire from the default branch head', (kind) => {
  it('one delivery per schedule and minute, once across coordinators, processed into a run of the scheduled workflow only', () =>
    withTestDatabase(kind, async ({ db }) => {
      const repo = await createLockRepo();
      const head = repo.commit({ '.kici/kici.lock.json': LOCK });
      await upsertRepository(db, { name: 'acme/app', provider: 'local', path: repo.path, cloneUrl: null, defaultBranch: null, token: null }, 0);
      const now = { value: at('2026-12-05T03:00:01Z') };
      const first = clockOn(db, now);
      const second = clockOn(db, now);
      const fired = await first.clock.tick(now.value);
      const key = { source: 'schedule', deliveryId: 'acme/app|0 3 * * *|UTC|2026-12-05T03:00:00.000Z' };
      assert.deepEqual(fired, [key]);
      assert.deepEqual(first.notified, [key]);
      assert.deepEqual(await second.clock.tick(now.value), [], 'another coordinator ticking the same minute records a duplicate');
      assert.ok(first.warnings.some((w) => w['msg'] === 'a schedule trigger can never fire' && String(w['problem']).includes('has 4 fields')), JSON.stringify(first.warnings));
      assert.deepEqual(await first.clock.tick(at('2026-12-05T03:01:01Z')), [], 'nothing fires at 03:01');

      const runtime = await startTestRuntime(db, 'coord-sched');
      const sandbox = new IsolatedVmSandbox();
      try {
        const startRuns = createRunStarter({ db, createRun: (run) => runtime.supervisor.createRun(run), sandbox, timeouts: DEFAULT_JOB_TIMEOUTS, maxAttempts: 5, now: Date.now, log: testLog });
        const pipeline = { repository: (name: string) => getRepository(db, name), genericSourceRepository: () => Promise.resolve(null), cache: new LockFileCache(), startRuns, log: testLog };
        const process = createDeliveryProcessor({ db, pipeline, now: Date.now, log: testLog });
        assert.deepEqual(await claimDueDeliveries(db, { worker: 'w-1', now: Date.now(), leaseMs: 60_000, limit: 10 }), [key]);
        assert.equal(await process(key, 'w-1'), 'done');
        const delivery = await db.selectFrom('deliveries').select(['status', 'outcome']).where('delivery_id', '=', key.deliveryId).executeTakeFirstOrThrow();
        assert.equal(delivery.status, 'processed', JSON.stringify(delivery.outcome));
        const runs = await db.selectFrom('runs').select(['workflow_name', 'input_summary']).execute();
        assert.deepEqual(runs.map((r) => r.workflow_name), ['nightly'], 'not the same expression in New York time, not the push workflow');
        const source = runs[0]?.input_summary as { ref: string; sha: string; event: { type: string; payload: unknown } };
        assert.deepEqual([source.ref, source.sha, source.event.type], ['main', head, 'schedule'], 'checked out at the default branch head');
        assert.deepEqual(source.event.payload, { cronExpression: '0 3 * * *', timezone: 'UTC', scheduledAt: '2026-12-05T03:00:00.000Z' });
      } finally {
        sandbox.dispose();
        await runtime.stop();
      }
    }));

  it('minutes a stalled process missed fire late (up to five); a new lock on the default branch is read again; a removed repository fires nothing', () =>
    withTestDatabase(kind, async ({ db }) => {
      const repo = await createLockRepo();
      repo.commit({ '.kici/kici.lock.json': LOCK });
      await upsertRepository(db, { name: 'acme/app', provider: 'local', path: repo.path, cloneUrl: null, defaultBranch: null, token: null }, 0);
      const now = { value: at('2026-12-05T07:58:01Z') };
      const { clock } = clockOn(db, now);
      assert.deepEqual(await clock.tick(now.value), []);
      const late = await clock.tick(at('2026-12-05T08:03:30Z'));
      assert.deepEqual(late.map((k) => k.deliveryId), ['acme/app|0 3 * * *|America/New_York|2026-12-05T08:00:00.000Z'], '03:00 in New York, missed while stalled');
      repo.commit({ '.kici/kici.lock.json': lockFileWith([scheduled('every-ten', '*/10 * * * *')]) }, 'new schedule');
      clock.forget('acme/app');
      const after = await clock.tick(at('2026-12-05T08:10:02Z'));
      assert.deepEqual(after.map((k) => k.deliveryId), ['acme/app|*/10 * * * *|UTC|2026-12-05T08:10:00.000Z']);
      await deleteRepository(db, 'acme/app');
      assert.deepEqual(await clock.tick(at('2026-12-05T08:20:02Z')), [], 'a repository no longer registered fires nothing');
    }));
});
