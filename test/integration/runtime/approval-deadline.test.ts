import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, it } from 'node:test';
import { DATABASE_KINDS, skipReason, withTestDatabase } from '../../support/database.ts';
import { eventually, planFor, startTestRuntime, waitingWorkflow } from '../../support/runtime.ts';

const HOLD_MS = 1_500;

for (const kind of DATABASE_KINDS) {
  describe(`the approval deadline of a held job (${kind} Postgres)`, { skip: await skipReason(kind) }, () => {
    it('is stored with the snapshot, survives the coordinator going away, and cancels the job once adopted; the record ends expired', async () => {
      await withTestDatabase(kind, async ({ db }) => {
        const first = await startTestRuntime(db, 'coord-a');
        const runId = randomUUID();
        const input = planFor(runId, waitingWorkflow('wf'));
        input.jobs = input.jobs.map((plan) => ({ ...plan, hold: { environment: 'prod', kind: 'approval', expiresInMs: HOLD_MS, why: 'approval required' } }));
        await first.supervisor.createRun({ input, repository: null });
        const timer = await eventually(() => db.selectFrom('timers').selectAll().where('run_id', '=', runId).where('kind', '=', 'approval').executeTakeFirst(), 5000, 'the approval deadline row');
        assert.equal(timer.job_key, 'build');
        await first.stop();
        const second = await startTestRuntime(db, 'coord-b');
        try {
          const ended = await eventually(
            () => db.selectFrom('runs').select(['status']).where('run_id', '=', runId).where('status', '=', 'cancelled').executeTakeFirst(),
            10_000,
            'the adopted run to end cancelled by the approval deadline',
          );
          assert.equal(ended.status, 'cancelled');
          const job = await db.selectFrom('jobs').select(['status', 'outcome']).where('run_id', '=', runId).executeTakeFirstOrThrow();
          assert.deepEqual([job.status, job.outcome], ['cancelled', 'approval of environment prod expired: no decision within 1 min']);
          const gate = await eventually(() => db.selectFrom('approval_gates').selectAll().where('run_id', '=', runId).where('status', '=', 'expired').executeTakeFirst(), 5000, 'the expired record');
          assert.equal(gate.decided_by, 'approval deadline');
        } finally {
          await second.stop();
        }
      });
    });
  });
}
