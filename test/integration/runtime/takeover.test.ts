import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, it } from 'node:test';
import { MAX_TAIL_EVENTS } from '../../../actors/runs/snapshot-policy.ts';
import { readJournal } from '../../../src/db/journal.ts';
import { DATABASE_KINDS, holdRowLocks, skipReason, withTestDatabase } from '../../support/database.ts';
import { sql, type Kysely } from 'kysely';
import type { Schema } from '../../../src/db/schema.ts';
import { eventually, planFor, startTestRuntime, waitingWorkflow, type TestRuntime } from '../../support/runtime.ts';

/** A one-job run placed on agent-7 (which has no session), its dispatch acked. */
async function ackedRun(runtime: TestRuntime, db: Kysely<Schema>) {
  const runId = randomUUID();
  await runtime.supervisor.createRun({ input: planFor(runId, waitingWorkflow('wf')), repository: null });
  const attempt = { jobKey: 'build', agentId: 'agent-7', dispatchId: randomUUID() };
  await eventually(async () => (await readJournal(db, runId)).length >= 2);
  await runtime.supervisor.send(runId, { type: 'placement.granted', agentKind: 'static', ...attempt });
  await runtime.supervisor.send(runId, { type: 'agent.job.ack', ...attempt });
  return { runId, attempt };
}

for (const kind of DATABASE_KINDS) {
  describe(`takeover of running jobs (${kind} Postgres)`, { skip: await skipReason(kind) }, () => {
    it('B5: after a takeover the job keeps its real owner; the agent reclaims it and it is running again', async () => {
      await withTestDatabase(kind, async ({ db }) => {
        const first = await startTestRuntime(db, 'coord-a');
        const { runId, attempt } = await ackedRun(first, db);
        await first.supervisor.send(runId, { type: 'agent.job.status', state: 'running', ...attempt });
        await first.stop();
        const second = await startTestRuntime(db, 'coord-b');
        try {
          await eventually(() => second.supervisor.jobContext(runId, 'build') !== null, 5000, 'adoption');
          // The reclaim goes after coord-b's run.restored: sent before it (the job may show recovering
          // already, from coord-a), it was undone by run.restored, which names agent-7 connected nowhere.
          await eventually(async () => (await readJournal(db, runId)).some((e) => (e.event as { type: string }).type === 'run.restored'), 5000, 'run.restored journaled');
          const recovering = await eventually(
            () => db.selectFrom('jobs').selectAll().where('run_id', '=', runId).where('status', '=', 'recovering').executeTakeFirst(),
            5000,
            'the job of an agent with no session to be recovering (FO-2)',
          );
          assert.equal(recovering.agent_id, 'agent-7', 'the owner is the real agent id, never "unknown"');
          await second.supervisor.send(runId, { type: 'agent.job.reclaim', ...attempt });
          assert.equal(second.supervisor.jobContext(runId, 'build')?.assignment?.agentId, 'agent-7');
          const running = await eventually(
            () => db.selectFrom('jobs').selectAll().where('run_id', '=', runId).where('status', '=', 'running').executeTakeFirst(),
            5000,
            'running again after the reclaim',
          );
          assert.equal(running.dispatch_id, attempt.dispatchId);
        } finally {
          await second.stop();
        }
      });
    });

    it('B5: a run stopped behind a journal tail is restored by replaying it onto its snapshot (its job keeps its agent), and goes on after it', async () => {
      await withTestDatabase(kind, async ({ db }) => {
        const first = await startTestRuntime(db, 'coord-a');
        const { runId } = await ackedRun(first, db);
        const live = first.supervisor.jobContext(runId, 'build');
        await first.stop();
        const stored = await db.selectFrom('run_snapshots').select('seq').where('run_id', '=', runId).executeTakeFirstOrThrow();
        const tail = (await readJournal(db, runId)).filter((e) => e.seq > stored.seq);
        assert.ok(tail.length > 0 && tail.length < MAX_TAIL_EVENTS, `a tail of 1 to ${MAX_TAIL_EVENTS - 1} events after the snapshot, got ${tail.length}`);
        const jobRow = await db.selectFrom('jobs').select(['status', 'agent_id']).where('run_id', '=', runId).executeTakeFirstOrThrow();
        assert.equal(jobRow.agent_id, 'agent-7', 'the job row was written with the tail');
        assert.notEqual(jobRow.status, 'pending');

        const second = await startTestRuntime(db, 'coord-b');
        try {
          const restored = await eventually(async () => (await readJournal(db, runId)).find((e) => (e.event as { type: string }).type === 'run.restored'), 5000, 'run.restored journaled');
          // A stored effect the restore runs again may journal its answer first.
          assert.ok(restored.seq > (tail.at(-1)?.seq ?? Infinity), 'the restored run goes on after its tail');
          const adopted = second.supervisor.jobContext(runId, 'build');
          // The restore itself is remembered as the attempt's recovery cause (the coordinator restarted under it).
          const owner = (job: typeof live) => job && { agentId: job.assignment?.agentId, dispatchId: job.assignment?.dispatchId, attempt: job.attempt };
          assert.deepEqual(owner(adopted), owner(live), 'the tail was replayed: the assignment is the one the run had live');
          assert.equal(adopted?.assignment?.recovery, 'coordinator_restart');
          await second.supervisor.send(runId, { type: 'run.cancel', reason: 'test', force: true, by: 'test' });
          const journal = await readJournal(db, runId);
          assert.deepEqual(journal.map((e) => e.seq), journal.map((_, i) => i), 'seqs stay contiguous');
          const final = await db.selectFrom('run_snapshots').select(['seq', 'status']).where('run_id', '=', runId).executeTakeFirstOrThrow();
          assert.deepEqual(final, { seq: journal.length - 1, status: 'cancelled' }, 'a finished run stores its final snapshot');
        } finally {
          await second.stop();
        }
      });
    });

    it('a tail never grows past MAX_TAIL_EVENTS, even of events that change nothing', async () => {
      await withTestDatabase(kind, async ({ db }) => {
        const runtime = await startTestRuntime(db, 'coord-a');
        try {
          const runId = randomUUID();
          await runtime.supervisor.createRun({ input: planFor(runId, waitingWorkflow('wf', { jobs: ['a', 'b'] })), repository: null });
          await eventually(async () => (await readJournal(db, runId)).some((e) => (e.event as { type: string }).type === 'placement.none'));
          const behind = async () => {
            const stored = await db.selectFrom('run_snapshots').select('seq').where('run_id', '=', runId).executeTakeFirstOrThrow();
            return (await readJournal(db, runId)).length - 1 - stored.seq;
          };
          // A deadline that is not the job's: nothing changes, but its entry is not an unchanged one, so it starts a tail.
          await runtime.supervisor.send(runId, { type: 'timer.queue.expired', deadlineId: 'not-armed', dueAt: 0, jobKey: 'a' });
          assert.equal(await behind(), 1);
          const seen: number[] = [];
          for (let i = 0; i < 2 * MAX_TAIL_EVENTS; i++) {
            await runtime.supervisor.send(runId, { type: 'run.restored', liveAgents: [] });
            seen.push(await behind());
          }
          assert.ok(Math.max(...seen) < MAX_TAIL_EVENTS, `journal rows behind the snapshot: ${seen.join(', ')}`);
          assert.equal(seen.at(-1), 0, 'with no tail left, an unchanged event moves the snapshot to its seq');
        } finally {
          await runtime.stop();
        }
      });
    });

    it('a tail ends once its journal rows weigh as much as the snapshot: a large run keeps up to MAX_TAIL_EVENTS - 1 events behind, large events store it every other one', async () => {
      await withTestDatabase(kind, async ({ db }) => {
        const runtime = await startTestRuntime(db, 'coord-a');
        try {
          const behindAfterEach = async (runId: string, deadlineId: string, events: number) => {
            const seen: number[] = [];
            for (let i = 0; i < events; i++) {
              // A deadline that is not armed: the state stays, but its entry is not an unchanged one.
              await runtime.supervisor.send(runId, { type: 'timer.queue.expired', deadlineId, dueAt: 0, jobKey: 'job0' });
              const stored = await db.selectFrom('run_snapshots').select('seq').where('run_id', '=', runId).executeTakeFirstOrThrow();
              seen.push((await readJournal(db, runId)).length - 1 - stored.seq);
            }
            return seen;
          };
          const created = async (jobs: number) => {
            const runId = randomUUID();
            const names = Array.from({ length: jobs }, (_, i) => `job${i}`);
            await runtime.supervisor.createRun({ input: planFor(runId, waitingWorkflow('wf', { jobs: names })), repository: null });
            await eventually(async () => (await readJournal(db, runId)).some((e) => (e.event as { type: string }).type === 'placement.none'));
            const stored = await db.selectFrom('run_snapshots').select('seq').where('run_id', '=', runId).executeTakeFirstOrThrow();
            assert.equal(stored.seq, (await readJournal(db, runId)).length - 1, 'the entry that creates a run stores its snapshot');
            return runId;
          };
          const large = await created(40);
          const counted = Array.from({ length: MAX_TAIL_EVENTS + 1 }, (_, i) => (i + 1) % MAX_TAIL_EVENTS);
          assert.deepEqual(await behindAfterEach(large, 'not-armed', MAX_TAIL_EVENTS + 1), counted, 'small events on a large snapshot: the count bounds the tail');
          const small = await created(1);
          assert.deepEqual(await behindAfterEach(small, 'x'.repeat(20_000), 4), [1, 0, 1, 0], 'an event larger than the snapshot: the next one stores it');
        } finally {
          await runtime.stop();
        }
      });
    });

    it('an adopter keeps renewing its own lease while the adoption takes longer than the lease lasts', async () => {
      await withTestDatabase(kind, async ({ db }) => {
        const first = await startTestRuntime(db, 'coord-a');
        const runId = randomUUID();
        await first.supervisor.createRun({ input: planFor(runId, waitingWorkflow('wf')), repository: null });
        await first.ownership.stop(); // dead: no more renewals
        // The run's owner row stays locked: an adoption waits on it for as long as the test wants.
        const lock = await holdRowLocks(db, sql`SELECT 1 FROM run_owner WHERE run_id = ${runId} FOR UPDATE`);
        await new Promise((resolve) => setTimeout(resolve, 500)); // coord-a's lease (TTL 400 ms) has ended
        // coord-b adopts while it starts: its first scan finds coord-a expired.
        const starting = startTestRuntime(db, 'coord-b');
        let leaseLeftMs: number | undefined;
        try {
          await eventually(async () => {
            const { rows } = await sql<{ n: number }>`SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%UPDATE run_owner SET coordinator_id%'`.execute(db);
            return (rows[0]?.n ?? 0) > 0;
          }, 10_000, 'coord-b\'s adoption to wait on the locked row');
          await new Promise((resolve) => setTimeout(resolve, 1000)); // 2.5 lease lifetimes
          const lease = await db.selectFrom('coordinators').select('lease_until').where('id', '=', 'coord-b').executeTakeFirstOrThrow();
          leaseLeftMs = Number(lease.lease_until) - Date.now();
        } finally {
          lock.release();
          await lock.released;
        }
        const second = await starting;
        try {
          assert.ok(leaseLeftMs !== undefined && leaseLeftMs > 0, `coord-b still holds a live lease while it adopts (it ran out ${-(leaseLeftMs ?? 0)} ms before)`);
          await eventually(() => second.supervisor.owns(runId), 10_000, 'the adoption to finish');
          assert.deepEqual(second.fenced, [], 'coord-b was never fenced');
        } finally {
          await first.stop();
          await second.stop();
        }
      });
    });

    it('a job that waited for an agent is offered agents again by the adopting coordinator', async () => {
      await withTestDatabase(kind, async ({ db }) => {
        const first = await startTestRuntime(db, 'coord-a');
        const runId = randomUUID();
        await first.supervisor.createRun({ input: planFor(runId, waitingWorkflow('wf')), repository: null });
        await eventually(async () => (await readJournal(db, runId)).some((e) => (e.event as { type: string }).type === 'placement.none'));
        await first.stop();
        const second = await startTestRuntime(db, 'coord-b');
        await eventually(() => second.dispatcher.waitingCount === 1, 5000, 'the job back on the dispatcher list');
        await second.stop();
      });
    });

    it('a restored run whose jobs only ask for agents again journals run.restored and rewrites no state; it goes on from there', async () => {
      await withTestDatabase(kind, async ({ db }) => {
        const first = await startTestRuntime(db, 'coord-a');
        const runId = randomUUID();
        await first.supervisor.createRun({ input: planFor(runId, waitingWorkflow('wf', { jobs: ['a', 'b'] })), repository: null });
        // b needs a: a waits for an agent, b for a.
        await eventually(async () => (await readJournal(db, runId)).some((e) => (e.event as { type: string }).type === 'placement.none'));
        await first.stop();
        const stored = await db.selectFrom('run_snapshots').selectAll().where('run_id', '=', runId).executeTakeFirstOrThrow();
        const jobsBefore = await db.selectFrom('jobs').selectAll().where('run_id', '=', runId).orderBy('job_key').execute();
        const second = await startTestRuntime(db, 'coord-b');
        try {
          const restored = await eventually(async () => (await readJournal(db, runId)).find((e) => (e.event as { type: string }).type === 'run.restored'), 5000, 'run.restored journaled');
          assert.equal(restored.seq, stored.seq + 1);
          const after = await db.selectFrom('run_snapshots').selectAll().where('run_id', '=', runId).executeTakeFirstOrThrow();
          assert.equal(after.seq, restored.seq, 'the stored snapshot is at the journal head, so the next event follows it');
          assert.deepEqual(after.snapshot, stored.snapshot, 'the state is the one stored before');
          assert.deepEqual(await db.selectFrom('jobs').selectAll().where('run_id', '=', runId).orderBy('job_key').execute(), jobsBefore);
          await eventually(() => second.dispatcher.waitingCount === 1, 5000, 'a back on the dispatcher list');
          await second.supervisor.send(runId, { type: 'run.cancel', reason: 'test', force: false, by: 'test' });
          const journal = await readJournal(db, runId);
          assert.deepEqual(journal.map((e) => e.seq), journal.map((_, i) => i), 'seqs stay contiguous');
          assert.equal((await db.selectFrom('runs').select('status').where('run_id', '=', runId).executeTakeFirstOrThrow()).status, 'cancelled');
        } finally {
          await second.stop();
        }
      });
    });
  });
}
