import assert from 'node:assert/strict';
import { it } from 'node:test';
import { pino } from 'pino';
import type { LockFile, LockWorkflow } from '../../../machines/lock.types.ts';
import type { NewRun } from '../../../actors/runs/ports.ts';
import { DEFAULT_JOB_TIMEOUTS } from '../../../machines/types.ts';
import type { Delivery } from '../../../src/db/deliveries.ts';
import type { SourceBase } from '../../../src/pipeline/run-source.ts';
import { runIdFor } from '../../../src/pipeline/run-id.ts';
import { createRunStarter } from '../../../src/pipeline/start-runs.ts';
import { DeliveryNotRecordedError } from '../../../src/queue/delivery-queue.ts';
import { IsolatedVmSandbox } from '../../../src/sandbox/index.ts';
import { describeEachKind, testLog, withTestDatabase } from '../../support/database.ts';
import { startTestRuntime } from '../../support/runtime.ts';
import * as gh from '../../unit/pipeline/github-payloads.ts';
import { github } from '../../unit/pipeline/trigger-helpers.ts';

const workflow = (name: string): LockWorkflow =>
  ({
    name,
    triggers: [{ _type: 'push', branches: [{ type: 'glob', pattern: 'main' }], paths: [] }],
    jobs: [{ _type: 'static', name: 'build', needs: [], steps: [{ name: 's', hasOutputs: false, run: 'true' }] }],
  }) as unknown as LockWorkflow;
const lock = { schemaVersion: 29, workflows: [workflow('first'), workflow('second')] } as unknown as LockFile;
const delivery: Delivery = { source: 'github', deliveryId: 'd-1', eventName: 'push', headers: {}, body: Buffer.from('{}'), receivedAt: 0, status: 'processing', attempts: 1 };
const source: SourceBase = { repository: 'acme/app', repoUrl: null, ref: 'refs/heads/main', sha: 'a'.repeat(40), provider: 'local', event: github('push', gh.push('refs/heads/main')), trustTier: 'trusted', lockFileSource: 'event' };

/** Found by the chaos suite: a Postgres reset while a run was being created turned into a failed run. */
await describeEachKind('starting the runs of a delivery', (kind) => {
  it('a database failure while creating a run is retried with the delivery, never recorded as a failed run', () =>
    withTestDatabase(kind, async ({ db }) => {
      const runtime = await startTestRuntime(db, 'coord-s');
      const sandbox = new IsolatedVmSandbox();
      let failNext = true;
      const createRun = async (run: NewRun) => {
        if (run.input.runId === runIdFor('github', 'd-1', 'second') && failNext) {
          failNext = false;
          throw new Error('Client has encountered a connection error and is not queryable');
        }
        await runtime.supervisor.createRun(run);
      };
      try {
        const starter = createRunStarter({ db, createRun, sandbox, timeouts: DEFAULT_JOB_TIMEOUTS, maxAttempts: 5, now: Date.now, log: testLog });
        await assert.rejects(starter.matched(delivery, lock, source), /connection error/, 'the delivery fails and will be retried');
        const failed = await db.selectFrom('runs').select(['run_id', 'status']).where('status', '=', 'failed').execute();
        assert.deepEqual(failed, [], 'no failed run for a workflow that did nothing wrong');
        const retried = await starter.matched(delivery, lock, source);
        assert.deepEqual(retried.map((r) => [r.workflow, r.runId, r.initFailure]), [
          ['first', runIdFor('github', 'd-1', 'first'), undefined],
          ['second', runIdFor('github', 'd-1', 'second'), undefined],
        ]);
        assert.equal((await db.selectFrom('runs').select('run_id').execute()).length, 2, 'the retry found the first run and created the second');
      } finally {
        sandbox.dispose();
        await runtime.stop();
      }
    }));

  it('a run whose input cannot be stored exists, failed with the reason, and the delivery is done (not retried forever)', () =>
    withTestDatabase(kind, async ({ db }) => {
      const runtime = await startTestRuntime(db, 'coord-s');
      const sandbox = new IsolatedVmSandbox();
      try {
        const starter = createRunStarter({ db, createRun: (run) => runtime.supervisor.createRun(run), sandbox, timeouts: DEFAULT_JOB_TIMEOUTS, maxAttempts: 5, now: Date.now, log: testLog });
        const unstorable = { ...source, event: { ...source.event, payload: { ...source.event.payload, size: 10n } } };
        const started = await starter.matched(delivery, lock, unstorable);
        assert.deepEqual(started.map((r) => r.runId), [runIdFor('github', 'd-1', 'first'), runIdFor('github', 'd-1', 'second')]);
        // The entry's last seq: 1 when its job was told in the same entry why it waits (placement.none).
        for (const r of started) assert.match(r.initFailure ?? '', /input summary at seq \d+ cannot be stored as JSON: it holds a BigInt/);
        const runs = await db.selectFrom('runs').select(['status', 'failure_reason']).execute();
        assert.deepEqual(runs.map((r) => r.status), ['failed', 'failed']);
      } finally {
        sandbox.dispose();
        await runtime.stop();
      }
    }));

  it('a delivery handed over while it is recorded makes its run ready at once, writes it once its row is stored, and nothing when it is not', () =>
    withTestDatabase(kind, async ({ db }) => {
      // Warnings and errors the runtime logs: a write sent ahead of its run's first entry would fail and be retried.
      const complaints: string[] = [];
      const log = pino({ level: 'warn' }, { write: (line: string) => void complaints.push(line) });
      const runtime = await startTestRuntime(db, 'coord-s', {}, log);
      const sandbox = new IsolatedVmSandbox();
      const created: string[] = [];
      const createRun = async (run: NewRun) => {
        created.push(run.input.runId);
        await runtime.supervisor.createRun(run);
      };
      const stored = async () => (await db.selectFrom('run_events').select(['run_id', 'seq', 'event']).orderBy('run_id').orderBy('seq').execute()).map((r) => [r.run_id, r.seq, (r.event as { type: string }).type]);
      try {
        const starter = createRunStarter({ db, createRun, sandbox, timeouts: DEFAULT_JOB_TIMEOUTS, maxAttempts: 5, now: Date.now, log: testLog });
        const duplicate = deferred<boolean>();
        const refused = starter.matched({ ...delivery, deliveryId: 'd-dup', recording: duplicate.promise }, lock, source);
        const recorded = deferred<boolean>();
        const started = starter.matched({ ...delivery, deliveryId: 'd-new', recording: recorded.promise }, lock, source);
        await new Promise((resolve) => setTimeout(resolve, 50));
        const [dupFirst, newFirst] = [runIdFor('github', 'd-dup', 'first'), runIdFor('github', 'd-new', 'first')];
        assert.deepEqual(created, [dupFirst, newFirst], "each delivery's first run is made ready while its row is written");
        assert.deepEqual(await stored(), [], 'and nothing of it is written');
        // An event for a run not yet written waits for the run's first entry and is journaled after it.
        const cancelled = runtime.supervisor.send(newFirst, { type: 'run.cancel', reason: 'test', force: false, by: 'test' });
        await new Promise((resolve) => setTimeout(resolve, 20));
        duplicate.resolve(false);
        await assert.rejects(refused, DeliveryNotRecordedError);
        assert.equal(runtime.supervisor.owns(dupFirst), false, 'the run of a delivery not recorded leaves memory');
        recorded.resolve(true);
        assert.deepEqual((await started).map((r) => r.runId), [newFirst, runIdFor('github', 'd-new', 'second')]);
        await cancelled.catch((e: unknown) => console.log('CANCEL FAILED', e));
        const events = await stored();
        console.log('EVENTS', JSON.stringify(events));
        assert.deepEqual(events.filter(([runId]) => runId === newFirst).map(([, seq, type]) => [seq, type]).slice(0, 1), [[0, 'run.created']]);
        assert.ok(events.some(([runId, , type]) => runId === newFirst && type === 'run.cancel'), 'the cancel was journaled after the creation');
        assert.deepEqual(complaints, [], 'no write went ahead of its run and failed');
        const runs = await db.selectFrom('runs').select('run_id').orderBy('run_id').execute();
        assert.deepEqual(runs.map((r) => r.run_id), [newFirst, runIdFor('github', 'd-new', 'second')].sort(), 'the duplicate made no run');
      } finally {
        sandbox.dispose();
        await runtime.stop();
      }
    }));
});

function deferred<T>(): { promise: Promise<T>; resolve: (value: T) => void } {
  let resolve: (value: T) => void = () => undefined;
  const promise = new Promise<T>((settle) => (resolve = settle));
  return { promise, resolve };
}
