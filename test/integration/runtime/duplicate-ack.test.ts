import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, it } from 'node:test';
import type { Kysely } from 'kysely';
import { readJournal } from '../../../src/db/journal.ts';
import type { Schema } from '../../../src/db/schema.ts';
import { DATABASE_KINDS, skipReason, withTestDatabase } from '../../support/database.ts';
import { eventually, planFor, startTestRuntime, waitingWorkflow } from '../../support/runtime.ts';

async function journaledTypes(db: Kysely<Schema>, runId: string): Promise<string[]> {
  return (await readJournal(db, runId)).map((record) => (record.event as { type: string }).type);
}

async function dispatchesOf(db: Kysely<Schema>, runId: string): Promise<number> {
  const rows = await db.selectFrom('outbox').select('effect_id').where('run_id', '=', runId).where('kind', '=', 'sendDispatch').execute();
  return rows.length;
}

for (const kind of DATABASE_KINDS) {
  describe(`the same job run by two agents (${kind} Postgres)`, { skip: await skipReason(kind) }, () => {
    it('two coordinators + duplicate ack: the copy through the peer reaches the owner and changes nothing; after a takeover, one more changes nothing', async () => {
      await withTestDatabase(kind, async ({ db }) => {
        const owner = await startTestRuntime(db, 'coord-a');
        const peer = await startTestRuntime(db, 'coord-b');
        try {
          const runId = randomUUID();
          await owner.supervisor.createRun({ input: planFor(runId, waitingWorkflow('wf')), repository: null });
          await eventually(async () => (await readJournal(db, runId)).length >= 2);
          const attempt = { jobKey: 'build', agentId: 'agent-7', dispatchId: randomUUID() };
          await owner.supervisor.send(runId, { type: 'placement.granted', agentKind: 'static', ...attempt });
          // The agent's ack, and its copy (resent after a reconnect to the other coordinator), at once.
          const ack = { type: 'agent.job.ack', ...attempt } as const;
          const routes = await Promise.all([owner.deliver(runId, ack), peer.deliver(runId, ack)]);
          assert.deepEqual(routes.sort(), ['inbox', 'local'], 'the copy went to the owner through its inbox');
          await eventually(async () => (await journaledTypes(db, runId)).filter((type) => type === 'agent.job.ack').length === 2, 5_000, 'the owner to apply the copy');
          const afterCopy = owner.supervisor.jobContext(runId, 'build');
          assert.deepEqual([afterCopy?.attempt, afterCopy?.assignment?.dispatchId], [1, attempt.dispatchId], 'one attempt, on its one agent');
          await owner.stop();
          await eventually(() => peer.supervisor.jobContext(runId, 'build') !== null, 5_000, 'the peer to adopt the run');
          await peer.deliver(runId, ack);
          const adopted = peer.supervisor.jobContext(runId, 'build');
          assert.deepEqual([adopted?.attempt, adopted?.assignment?.dispatchId], [1, attempt.dispatchId], 'still one attempt after the takeover');
          const types = await journaledTypes(db, runId);
          assert.equal(types.filter((type) => type === 'placement.granted').length, 1, 'granted once');
          assert.equal(await dispatchesOf(db, runId), 1, 'one job.dispatch ever asked for');
        } finally {
          await owner.stop();
          await peer.stop();
        }
      });
    });
  });
}
