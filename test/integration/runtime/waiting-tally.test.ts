import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, it } from 'node:test';
import type { Supervisor } from '../../../actors/runs/supervisor.ts';
import { DATABASE_KINDS, skipReason, withTestDatabase } from '../../support/database.ts';
import { eventually, planFor, startTestRuntime, waitingWorkflow } from '../../support/runtime.ts';

/** Waiting jobs by kind as a walk of every live job finds them: what the tally must always equal. */
function walked(supervisor: Supervisor): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const runId of supervisor.ownedRunIds()) {
    for (const { context } of supervisor.jobsOf(runId)) if (context.waiting) counts[context.waiting.kind] = (counts[context.waiting.kind] ?? 0) + 1;
  }
  return counts;
}

function tallied(supervisor: Supervisor): Record<string, number> {
  return Object.fromEntries(supervisor.waitingCounts());
}

for (const kind of DATABASE_KINDS) {
  describe(`waiting jobs counted as runs change (${kind} Postgres)`, { skip: await skipReason(kind) }, () => {
    it('the tally equals a walk of every live job through events, grants, cancels, a crash and a restart', async () => {
      await withTestDatabase(kind, async ({ db }) => {
        const first = await startTestRuntime(db, 'coord-a');
        const runIds = Array.from({ length: 6 }, () => randomUUID());
        try {
          for (const runId of runIds) await first.supervisor.createRun({ input: planFor(runId, waitingWorkflow('wf', { jobs: ['a', 'b'] })), repository: null });
          await eventually(() => Object.values(walked(first.supervisor)).reduce((sum, n) => sum + n, 0) === 12, 5_000, 'every job to wait');
          assert.deepEqual(tallied(first.supervisor), walked(first.supervisor), 'after creation');
          const [other, granted, cancelled, crashing] = runIds as [string, string, string, string];
          await first.supervisor.send(other, { type: 'placement.none', jobKey: 'a', reason: { kind: 'capacity', message: 'all 3 matching agents are busy' } });
          await first.supervisor.send(granted, { type: 'placement.granted', jobKey: 'b', agentId: 'agent-1', dispatchId: randomUUID(), agentKind: 'static' });
          await first.supervisor.send(cancelled, { type: 'run.cancel', reason: 'test', force: false, by: 'test' });
          const actor = (first.supervisor as unknown as { runs: Map<string, { actor: { send: (event: unknown) => void } }> }).runs.get(crashing)?.actor;
          actor?.send({ type: 'run.cancel', force: false, by: 'test', at: 1, get reason(): string { throw new Error('boom in an action'); } });
          const afterEvents = walked(first.supervisor);
          assert.equal(afterEvents['capacity'], 1, 'the event changed one job');
          assert.deepEqual(tallied(first.supervisor), afterEvents, 'after an event, a grant, a cancel and a crash');
        } finally {
          await first.stop();
        }
        assert.deepEqual(tallied(first.supervisor), {}, 'a stopped supervisor counts nothing');
        const second = await startTestRuntime(db, 'coord-b');
        try {
          // The crashed run left memory as last committed, alive in the database: it is adopted with the others.
          await eventually(() => second.supervisor.size === 5, 5_000, 'the live runs to be adopted');
          assert.ok(Object.keys(walked(second.supervisor)).length > 0);
          assert.deepEqual(tallied(second.supervisor), walked(second.supervisor), 'after the restore');
        } finally {
          await second.stop();
        }
      });
    });
  });
}
