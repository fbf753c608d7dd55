import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, it } from 'node:test';
import { DATABASE_KINDS, skipReason, withTestDatabase } from '../../support/database.ts';
import { eventually, planFor, startTestRuntime, waitingWorkflow } from '../../support/runtime.ts';
import { asRelease4004 } from '../../support/snapshots.ts';

for (const kind of DATABASE_KINDS) {
  describe(`a run stored by the release before, restored by this one (${kind} Postgres)`, { skip: await skipReason(kind) }, () => {
    it('a 4004 snapshot (fixed fields not grouped) is migrated on restore, the run goes on, and its next snapshot is stored in this format', async () => {
      await withTestDatabase(kind, async ({ db }) => {
        const first = await startTestRuntime(db, 'coord-a');
        const runId = randomUUID();
        await first.supervisor.createRun({ input: planFor(runId, waitingWorkflow('wf')), repository: null });
        await first.stop();
        const stored = await db.selectFrom('run_snapshots').select(['snapshot', 'machine_version']).where('run_id', '=', runId).executeTakeFirstOrThrow();
        await db.updateTable('run_snapshots').set({ machine_version: 4004, snapshot: JSON.stringify(asRelease4004(stored.snapshot)) }).where('run_id', '=', runId).execute();
        const second = await startTestRuntime(db, 'coord-b');
        try {
          await eventually(() => second.supervisor.owns(runId), 10_000, 'the run to be adopted');
          assert.equal(second.supervisor.snapshotOf(runId)?.context.spec.workflowName, 'wf', 'restored in this release’s format');
          await second.supervisor.send(runId, { type: 'run.cancel', reason: 'upgrade test', force: false, by: 'test' });
          const run = await eventually(() => db.selectFrom('runs').select('status').where('run_id', '=', runId).where('status', '=', 'cancelled').executeTakeFirst(), 10_000, 'the run to end cancelled');
          assert.equal(run.status, 'cancelled');
          const now = await db.selectFrom('run_snapshots').select('machine_version').where('run_id', '=', runId).executeTakeFirstOrThrow();
          assert.equal(now.machine_version, stored.machine_version, 'its final snapshot is stored in this release’s version');
        } finally {
          await second.stop();
        }
      });
    });
  });
}
