import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, it } from 'node:test';
import { readJournal } from '../../../src/db/journal.ts';
import { DATABASE_KINDS, skipReason, withTestDatabase } from '../../support/database.ts';
import { eventually, planFor, startTestRuntime, waitingWorkflow } from '../../support/runtime.ts';

for (const kind of DATABASE_KINDS) {
  describe(`a deadline event for a due time armed over since (${kind} Postgres)`, { skip: await skipReason(kind) }, () => {
    it('is ignored and leaves the new deadline armed, in memory and in its row (chaos seed 2047895894: a job waited for ever)', async () => {
      await withTestDatabase(kind, async ({ db }) => {
        const runtime = await startTestRuntime(db, 'coord-a');
        try {
          const runId = randomUUID();
          await runtime.supervisor.createRun({ input: planFor(runId, waitingWorkflow('wf')), repository: null });
          await eventually(async () => (await readJournal(db, runId)).length >= 2);
          const attempt = { jobKey: 'build', agentId: 'agent-7', dispatchId: randomUUID() };
          const started = Date.now();
          await runtime.supervisor.send(runId, { type: 'placement.granted', agentKind: 'static', ...attempt, at: started });
          await runtime.supervisor.send(runId, { type: 'agent.job.ack', ...attempt, at: started });
          // agent-7 has no session here: the job waits for it to come back, and it does, with its attempt.
          await eventually(() => runtime.supervisor.jobHasTag(runId, 'build', 'waits-for-agent') || runtime.supervisor.jobContext(runId, 'build')?.deadlines.recovery !== undefined, 5_000, 'the job to wait for its agent');
          await runtime.supervisor.send(runId, { type: 'agent.job.reclaim', ...attempt, connectionId: 'c-1', at: started + 1_000 });
          const leaseRow = () => db.selectFrom('timers').select(['deadline_id', 'due_at']).where('run_id', '=', runId).where('kind', '=', 'lease').executeTakeFirst();
          const firstLease = await leaseRow();
          assert.ok(firstLease, 'the reclaim makes the job run and arms its lease');
          // The agent reclaims its attempt (after a takeover), which arms the lease again, later...
          await runtime.supervisor.send(runId, { type: 'agent.job.reclaim', ...attempt, connectionId: 'c-2', at: started + 5_000 });
          const secondLease = await leaseRow();
          assert.ok(secondLease && secondLease.due_at > firstLease.due_at, 'the reclaim moved the lease');
          const armedBefore = runtime.supervisor.timersArmed;
          // ...and only then comes the event of the first due time, fired at the restore.
          const stale = { type: 'timer.lease.expired', deadlineId: firstLease.deadline_id, dueAt: firstLease.due_at, jobKey: 'build' } as const;
          await runtime.supervisor.send(runId, { ...stale, at: started + 5_001 });
          assert.equal(runtime.supervisor.jobContext(runId, 'build')?.assignment?.dispatchId, attempt.dispatchId, 'the job still runs its attempt');
          assert.deepEqual(await leaseRow(), secondLease, 'the new lease stays stored');
          assert.equal(runtime.supervisor.timersArmed, armedBefore, 'the new lease stays armed in memory');
        } finally {
          await runtime.stop();
        }
      });
    });
  });
}
