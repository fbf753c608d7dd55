import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, it } from 'node:test';
import { sql } from 'kysely';
import { FencedError, RunNotOwnedError, RunNotStorableError } from '../../../actors/runs/errors.ts';
import { SNAPSHOT_VERSION } from '../../../actors/runs/supervisor.ts';
import { readJournal } from '../../../src/db/journal.ts';
import { DATABASE_KINDS, skipReason, withTestDatabase } from '../../support/database.ts';
import { eventually, planFor, startTestRuntime, waitingWorkflow } from '../../support/runtime.ts';

for (const kind of DATABASE_KINDS) {
  describe(`supervisor on ${kind} Postgres`, { skip: await skipReason(kind) }, () => {
    it('B1: the run and its first snapshot are durable before createRun resolves, before any effect runs', async () => {
      await withTestDatabase(kind, async ({ db }) => {
        const runtime = await startTestRuntime(db, 'coord-a');
        try {
          const runId = randomUUID();
          await runtime.supervisor.createRun({ input: planFor(runId, waitingWorkflow('wf')), repository: 'acme/app' });
          // The first effect (a placement request) may already have been answered and committed as seq 1.
          const snapshot = await db.selectFrom('run_snapshots').selectAll().where('run_id', '=', runId).executeTakeFirstOrThrow();
          assert.equal(snapshot.machine_version, SNAPSHOT_VERSION);
          const [created] = await readJournal(db, runId);
          assert.deepEqual([created?.seq, (created?.event as { type?: string } | undefined)?.type], [0, 'run.created']);
          const owner = await db.selectFrom('run_owner').selectAll().where('run_id', '=', runId).executeTakeFirstOrThrow();
          assert.equal(owner.coordinator_id, 'coord-a');
          const job = await eventually(() =>
            db.selectFrom('jobs').selectAll().where('run_id', '=', runId).where('status', '=', 'pending').executeTakeFirst(),
          );
          assert.deepEqual(job.waiting_reason, {
            kind: 'no_matching_agent',
            message: 'needs an agent that can execute run steps; none connected with labels label-nobody-has',
          });
        } finally {
          await runtime.stop();
        }
      });
    });

    it('a run whose creation throws before its entry is stored leaves memory and is stored when created again; a second createRun waits for the first', async () => {
      await withTestDatabase(kind, async ({ db }) => {
        const runtime = await startTestRuntime(db, 'coord-a');
        const stored = (runId: string) => db.selectFrom('runs').select('status').where('run_id', '=', runId).executeTakeFirst();
        try {
          const runId = randomUUID();
          const newRun = { input: planFor(runId, waitingWorkflow('wf')), repository: null };
          const placeNow = runtime.dispatcher.placeNow.bind(runtime.dispatcher);
          runtime.dispatcher.placeNow = () => {
            throw new Error('a bug while placing a job');
          };
          await assert.rejects(runtime.supervisor.createRun(newRun), /a bug while placing a job/);
          // Left in memory, it made the retry resolve at once: the delivery was marked processed with no run stored.
          assert.equal(runtime.supervisor.owns(runId), false, 'nothing of the failed creation stays');
          runtime.dispatcher.placeNow = placeNow;
          await runtime.supervisor.createRun(newRun);
          assert.ok(await stored(runId), 'created again, the run is stored');

          const twice = randomUUID();
          const first = runtime.supervisor.createRun({ input: planFor(twice, waitingWorkflow('wf')), repository: null });
          await runtime.supervisor.createRun({ input: planFor(twice, waitingWorkflow('wf')), repository: null });
          assert.ok(await stored(twice), 'the second call resolved only once the first creation was stored');
          await first;
        } finally {
          await runtime.stop();
        }
      });
    });

    it('journals every accepted event with contiguous sequence numbers and the state after it', async () => {
      await withTestDatabase(kind, async ({ db }) => {
        const runtime = await startTestRuntime(db, 'coord-a');
        const runId = randomUUID();
        await runtime.supervisor.createRun({ input: planFor(runId, waitingWorkflow('wf', { jobs: ['a', 'b'] })), repository: null });
        await eventually(async () => (await readJournal(db, runId)).length >= 2);
        await runtime.supervisor.send(runId, { type: 'run.cancel', reason: 'test', force: false, by: 'test' });
        const journal = await readJournal(db, runId);
        assert.deepEqual(journal.map((e) => e.seq), journal.map((_, i) => i));
        assert.deepEqual((journal.at(-1)?.stateAfter as { run: unknown }).run, 'cancelled');
        const run = await db.selectFrom('runs').selectAll().where('run_id', '=', runId).executeTakeFirstOrThrow();
        assert.equal(run.status, 'cancelled');
        assert.equal(runtime.supervisor.owns(runId), false, 'a finished run leaves memory');
        await assert.rejects(runtime.supervisor.send(runId, { type: 'run.cancel', reason: 'x', force: true, by: 'x' }), RunNotOwnedError);
        await runtime.stop();
      });
    });

    it('a run actor whose action throws leaves memory as last committed; the other runs carry on', async () => {
      await withTestDatabase(kind, async ({ db }) => {
        const runtime = await startTestRuntime(db, 'coord-a');
        try {
          const [crashing, healthy] = [randomUUID(), randomUUID()];
          for (const runId of [crashing, healthy]) await runtime.supervisor.createRun({ input: planFor(runId, waitingWorkflow('wf')), repository: null });
          // Straight to the actor: recordCancel reads `reason`, which throws (the supervisor's own copy of an event would read it first).
          const actor = (runtime.supervisor as unknown as { runs: Map<string, { actor: { send: (event: unknown) => void } }> }).runs.get(crashing)?.actor;
          actor?.send({ type: 'run.cancel', force: false, by: 'test', at: 1, get reason(): string { throw new Error('boom in an action'); } });
          assert.equal(runtime.supervisor.owns(crashing), false, 'the crashed actor is gone');
          assert.equal(runtime.supervisor.owns(healthy), true);
          await runtime.supervisor.send(healthy, { type: 'run.cancel', reason: 'still served', force: false, by: 'test' });
          assert.equal((await db.selectFrom('runs').select('status').where('run_id', '=', healthy).executeTakeFirstOrThrow()).status, 'cancelled');
        } finally {
          await runtime.stop();
        }
      });
    });

    it('a run actor that crashes while it is created is failed in the database with the error, not left running', async () => {
      await withTestDatabase(kind, async ({ db }) => {
        const runtime = await startTestRuntime(db, 'coord-a');
        try {
          const runId = randomUUID();
          const input = planFor(runId, waitingWorkflow('wf'));
          // The run chart reads maxAttempts only while it builds its context, inside actor.start().
          Object.defineProperty(input, 'maxAttempts', { get: () => { throw new Error('boom in the context factory'); } });
          await assert.rejects(runtime.supervisor.createRun({ input, repository: 'acme/app' }), RunNotStorableError);
          assert.equal(runtime.supervisor.owns(runId), false, 'the crashed actor is gone');
          const run = await db.selectFrom('runs').selectAll().where('run_id', '=', runId).executeTakeFirstOrThrow();
          assert.deepEqual([run.status, run.workflow_name, run.repository], ['failed', 'wf', 'acme/app']);
          assert.match(run.failure_reason ?? '', /its run actor crashed: boom in the context factory/);
        } finally {
          await runtime.stop();
        }
      });
    });

    it('group commit: concurrent events of many runs share transactions', async () => {
      await withTestDatabase(kind, async ({ db }) => {
        const runtime = await startTestRuntime(db, 'coord-a');
        const ids = Array.from({ length: 200 }, () => randomUUID());
        await Promise.all(ids.map((id) => runtime.supervisor.createRun({ input: planFor(id, waitingWorkflow('wf')), repository: null })));
        const rows = await db.selectFrom('run_snapshots').select('run_id').execute();
        assert.equal(rows.length, 200);
        const metric = await runtime.supervisor['options'].metrics.batchSize.get();
        const count = metric.values.find((v) => v.metricName === 'switchyard_group_commit_batch_size_count')?.value ?? 0;
        assert.ok(count < 200, `200 creations took ${count} transactions`);
        await runtime.stop();
      });
    });

    it('B8: a run persisted mid-deadline is adopted by another coordinator and the deadline fires at its original time', async () => {
      await withTestDatabase(kind, async ({ db }) => {
        const first = await startTestRuntime(db, 'coord-a');
        const runId = randomUUID();
        const createdAt = Date.now();
        await first.supervisor.createRun({ input: planFor(runId, waitingWorkflow('wf', { timeoutMs: 1500 }), createdAt), repository: null });
        await first.stop();
        const second = await startTestRuntime(db, 'coord-b');
        const run = await eventually(
          () => db.selectFrom('runs').selectAll().where('run_id', '=', runId).where('status', '=', 'failed').executeTakeFirst(),
          10_000,
          'the adopted run to fail on its workflow deadline',
        );
        assert.equal(run.failure_reason, 'workflow_timeout');
        const fired = (await readJournal(db, runId)).filter((e) => (e.event as { type: string }).type === 'timer.workflow.expired');
        assert.equal(fired.length, 1, 'the deadline fired exactly once');
        const dueAt = (fired[0]?.event as { dueAt: number }).dueAt;
        assert.equal(dueAt, createdAt + 1500);
        assert.ok((fired[0]?.receivedAt ?? 0) >= dueAt, 'never before its time');
        assert.ok((fired[0]?.receivedAt ?? 0) - dueAt < 1000, 'not re-armed relative to the takeover');
        await second.stop();
      });
    });

    it('B6/B16: a live coordinator keeps its runs; a paused one that lost its lease cannot write (zombie)', async () => {
      await withTestDatabase(kind, async ({ db }) => {
        const first = await startTestRuntime(db, 'coord-a');
        const runId = randomUUID();
        await first.supervisor.createRun({ input: planFor(runId, waitingWorkflow('wf')), repository: null });
        const second = await startTestRuntime(db, 'coord-b');
        await new Promise((resolve) => setTimeout(resolve, 800));
        assert.equal(second.supervisor.owns(runId), false, 'a live owner keeps its run');
        void first.ownership.stop(); // paused: no more renewals, actors still in memory
        await eventually(() => second.supervisor.owns(runId), 5000, 'adoption after the lease expired');
        await assert.rejects(first.supervisor.send(runId, { type: 'run.cancel', reason: 'zombie', force: true, by: 'zombie' }), FencedError);
        assert.equal(first.supervisor.size, 0, 'the zombie dropped its actors');
        await second.supervisor.send(runId, { type: 'run.cancel', reason: 'owner', force: true, by: 'test' });
        const after = await readJournal(db, runId);
        const by = after.map((e) => (e.event as { by?: string }).by).filter(Boolean);
        assert.deepEqual(by, ['test'], 'the zombie wrote nothing; the owner did');
        assert.deepEqual(after.map((e) => e.seq), after.map((_, i) => i), 'one contiguous journal, one writer at a time');
        await first.stop();
        await second.stop();
      });
    });

    it('a stored snapshot of this version that its chart cannot restore fails its run with the reason; the others are restored', async () => {
      await withTestDatabase(kind, async ({ db }) => {
        const first = await startTestRuntime(db, 'coord-a');
        const [good, corrupt] = [randomUUID(), randomUUID()];
        for (const id of [good, corrupt]) await first.supervisor.createRun({ input: planFor(id, waitingWorkflow('wf')), repository: null });
        await eventually(async () => (await readJournal(db, corrupt)).length >= 2);
        await first.stop();
        await sql`UPDATE run_snapshots SET snapshot = jsonb_set(snapshot::jsonb, '{value}', '"no-such-state"')::json WHERE run_id = ${corrupt}`.execute(db);
        const second = await startTestRuntime(db, 'coord-b');
        try {
          await eventually(() => second.supervisor.owns(good), 5000, 'the good run to be adopted');
          const run = await eventually(
            () => db.selectFrom('runs').selectAll().where('run_id', '=', corrupt).where('status', '=', 'failed').executeTakeFirst(),
            5000,
            'the run that cannot be restored to be failed, not left running',
          );
          assert.match(run.failure_reason ?? '', /could not be restored/);
          assert.equal(second.supervisor.owns(corrupt), false);
        } finally {
          await second.stop();
        }
      });
    });

    it('refuses a snapshot of an unknown machine version with a clear error and restores the others', async () => {
      await withTestDatabase(kind, async ({ db }) => {
        const first = await startTestRuntime(db, 'coord-a');
        const good = randomUUID();
        const bad = randomUUID();
        for (const id of [good, bad]) await first.supervisor.createRun({ input: planFor(id, waitingWorkflow('wf')), repository: null });
        await eventually(async () => (await readJournal(db, bad)).length >= 2);
        await first.stop();
        await db.updateTable('run_snapshots').set({ machine_version: 999 }).where('run_id', '=', bad).execute();
        const second = await startTestRuntime(db, 'coord-b');
        await eventually(() => second.supervisor.owns(good), 5000, 'the good run to be adopted');
        assert.equal(second.supervisor.owns(bad), false);
        const restore = await second.supervisor['options'].metrics.restoreFailures.get();
        assert.equal(restore.values[0]?.value, 1);
        await second.stop();
      });
    });
  });
}
