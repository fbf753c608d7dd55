import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, it } from 'node:test';
import type { Kysely } from 'kysely';
import type { Schema } from '../../../src/db/schema.ts';
import { DATABASE_KINDS, skipReason, withTestDatabase } from '../../support/database.ts';
import { eventually, planFor, startTestRuntime, waitingWorkflow } from '../../support/runtime.ts';

async function job(db: Kysely<Schema>, runId: string) {
  return db.selectFrom('jobs').selectAll().where('run_id', '=', runId).executeTakeFirst();
}

async function jobIs(db: Kysely<Schema>, runId: string, test: (j: NonNullable<Awaited<ReturnType<typeof job>>>) => boolean) {
  return eventually(async () => {
    const found = await job(db, runId);
    return found && test(found) ? found : null;
  }, 8000, `job of run ${runId} to reach the expected state`);
}

for (const kind of DATABASE_KINDS) {
  describe(`event routing and concurrency groups (${kind} Postgres)`, { skip: await skipReason(kind) }, () => {
    it('a cancel sent by a coordinator that does not own the run reaches the owner through its inbox', async () => {
      await withTestDatabase(kind, async ({ db }) => {
        const owner = await startTestRuntime(db, 'coord-owner');
        const other = await startTestRuntime(db, 'coord-other');
        try {
          const runId = randomUUID();
          await owner.supervisor.createRun({ input: planFor(runId, waitingWorkflow('wf')), repository: null });
          assert.equal(await other.router.deliver(runId, { type: 'run.cancel', reason: 'from elsewhere', force: false, by: 'test' }), 'inbox');
          await eventually(async () => (await db.selectFrom('runs').select('status').where('run_id', '=', runId).executeTakeFirst())?.status === 'cancelled');
          // The inbox row is removed once the drain that delivered it finishes.
          await eventually(async () => (await db.selectFrom('run_inbox').selectAll().execute()).length === 0, 8000, 'delivered inbox events to be removed');
        } finally {
          await owner.stop();
          await other.stop();
        }
      });
    });

    it('max 1 without cancelInProgress: the second run waits FIFO with its position and is granted on release', async () => {
      await withTestDatabase(kind, async ({ db }) => {
        const runtime = await startTestRuntime(db, 'coord-a');
        const [first, second] = [randomUUID(), randomUUID()];
        const workflow = waitingWorkflow('deploy', { group: 'prod', cancelInProgress: false });
        await runtime.supervisor.createRun({ input: planFor(first, workflow), repository: null });
        await jobIs(db, first, (j) => j.waiting_reason !== null && (j.waiting_reason as { kind: string }).kind === 'no_matching_agent');
        await runtime.supervisor.createRun({ input: planFor(second, workflow), repository: null });
        // Until its group answers, the job says it asked (G-5); then it says where it stands.
        const waiting = await jobIs(db, second, (j) => /position/.test((j.waiting_reason as { message?: string } | null)?.message ?? ''));
        assert.deepEqual(waiting.waiting_reason, { kind: 'concurrency', message: 'waiting for concurrency group acme/app::prod (position 1)' });
        await runtime.supervisor.send(first, { type: 'run.cancel', reason: 'done with it', force: false, by: 'test' });
        await jobIs(db, second, (j) => (j.waiting_reason as { kind?: string } | null)?.kind === 'no_matching_agent');
        await runtime.stop();
      });
    });

    it('B11: cancelInProgress from the frozen run input supersedes the holder through its cancel path', async () => {
      await withTestDatabase(kind, async ({ db }) => {
        const runtime = await startTestRuntime(db, 'coord-a');
        const [first, second] = [randomUUID(), randomUUID()];
        const workflow = waitingWorkflow('deploy', { group: 'prod', cancelInProgress: true });
        await runtime.supervisor.createRun({ input: planFor(first, workflow), repository: null });
        await jobIs(db, first, (j) => (j.waiting_reason as { kind?: string } | null)?.kind === 'no_matching_agent');
        await runtime.supervisor.createRun({ input: planFor(second, workflow), repository: null });
        const cancelled = await jobIs(db, first, (j) => j.status === 'cancelled');
        assert.equal(cancelled.outcome, `superseded by run ${second} in concurrency group acme/app::prod`);
        await jobIs(db, second, (j) => (j.waiting_reason as { kind?: string } | null)?.kind === 'no_matching_agent');
        await runtime.stop();
      });
    });
  });
}
