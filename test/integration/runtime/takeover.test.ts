import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, it } from 'node:test';
import { readJournal } from '../../../src/db/journal.ts';
import { DATABASE_KINDS, skipReason, withTestDatabase } from '../../support/database.ts';
import { eventually, planFor, startTestRuntime, waitingWorkflow } from '../../support/runtime.ts';

for (const kind of DATABASE_KINDS) {
  describe(`takeover of running jobs (${kind} Postgres)`, { skip: await skipReason(kind) }, () => {
    it('B5: after a takeover the job keeps its real owner; the agent reclaims it and it is running again', async () => {
      await withTestDatabase(kind, async ({ db }) => {
        const first = await startTestRuntime(db, 'coord-a');
        const runId = randomUUID();
        await first.supervisor.createRun({ input: planFor(runId, waitingWorkflow('wf')), repository: null });
        const attempt = { jobKey: 'build', agentId: 'agent-7', dispatchId: randomUUID() };
        await eventually(async () => (await readJournal(db, runId)).length >= 2);
        await first.supervisor.send(runId, { type: 'placement.granted', agentKind: 'static', ...attempt });
        await first.supervisor.send(runId, { type: 'agent.job.ack', ...attempt });
        await first.supervisor.send(runId, { type: 'agent.job.status', state: 'running', ...attempt });
        await first.stop();
        const second = await startTestRuntime(db, 'coord-b');
        await eventually(() => second.supervisor.jobContext(runId, 'build') !== null, 5000, 'adoption');
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
        await second.stop();
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
  });
}
