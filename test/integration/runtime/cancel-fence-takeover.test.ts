import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, it } from 'node:test';
import type { Kysely } from 'kysely';
import type { AgentSession } from '../../../actors/agents/registry.ts';
import { claimCoordinatorLease, renewCoordinatorLease } from '../../../src/db/coordinator-lease.ts';
import type { Schema } from '../../../src/db/schema.ts';
import { upsertAgentSession } from '../../../src/db/shared-agents.ts';
import { DATABASE_KINDS, skipReason, withTestDatabase } from '../../support/database.ts';
import { eventually, startTestRuntime, waitingWorkflow, type TestRuntime } from '../../support/runtime.ts';
import { RunDriver } from '../replay/drive.ts';
import { stateName } from '../../support/machines.ts';

const LABEL = 'label-nobody-has';

/** coord-b: a peer that holds agent-on-b's socket and renews its lease, but is frozen: it carries out no command. */
async function frozenPeer(db: Kysely<Schema>): Promise<{ stop: () => void }> {
  const { epoch } = await claimCoordinatorLease(db, { id: 'coord-b', ttlMs: 1_000, now: Date.now() });
  const session = { agentId: 'agent-on-b', coordinatorId: 'coord-b', connectionId: 'conn-b', labels: [LABEL], properties: {}, taints: [] };
  await upsertAgentSession(db, { ...session, maxConcurrency: 1, scalerManaged: false, tokenId: null, now: Date.now() });
  const renewing = setInterval(() => void renewCoordinatorLease(db, { id: 'coord-b', epoch, ttlMs: 1_000, now: Date.now() }).catch(() => undefined), 100);
  return { stop: () => clearInterval(renewing) };
}

function agentHere(agentId: string): AgentSession {
  return {
    ...{ agentId, labels: [LABEL], taints: [], properties: { 'switchyard.runSteps': true }, connectionId: `c-${agentId}`, tokenId: null },
    ...{ maxConcurrency: 1, scalerManaged: false, unusable: null, lastFrameAt: Date.now(), slots: new Map(), sent: new Set<string>() },
    link: { send: () => undefined, close: () => undefined },
  };
}

async function cancelsLeftFor(db: Kysely<Schema>, runId: string): Promise<number[]> {
  const rows = await db.selectFrom('agent_outbox').select(['id', 'payload']).where('coordinator_id', '=', 'coord-b').execute();
  const cancelOf = (payload: unknown) => (payload as { frame?: { type?: string; runId?: string } }).frame;
  return rows.filter((row) => cancelOf(row.payload)?.type === 'job.cancel' && cancelOf(row.payload)?.runId === runId).map((row) => Number(row.id));
}

const waitingKind = (runtime: TestRuntime, runId: string) => runtime.supervisor.jobContext(runId, 'build')?.waiting?.kind;
/** The job's state in the chart, as `withdrawing.fenced.waiting`. */
const jobState = (runtime: TestRuntime, runId: string) => {
  const value = runtime.supervisor.snapshotOf(runId)?.children?.['build']?.snapshot.value;
  return value === undefined ? null : stateName(value);
};

for (const kind of DATABASE_KINDS) {
  describe(`B7 across a takeover (${kind} Postgres)`, { skip: await skipReason(kind) }, () => {
    it('a run adopted while its job’s cancel waits on a frozen peer: the adopter does not place the job until the peer passes the cancel on', async () => {
      await withTestDatabase(kind, async ({ db }) => {
        const peer = await frozenPeer(db);
        const owner = await startTestRuntime(db, 'coord-a');
        const adopter = await startTestRuntime(db, 'coord-c');
        try {
          const run = new RunDriver(db, owner);
          const { runId } = run;
          await run.create(waitingWorkflow('wf'));
          // Offered to the peers' agents; coord-b claims it for agent-on-b (its claim takes the offer away).
          const offer = db.selectFrom('placement_requests').select('run_id').where('run_id', '=', runId);
          await eventually(() => offer.executeTakeFirst(), 5_000, 'the job offered to the peers');
          await db.deleteFrom('placement_requests').where('run_id', '=', runId).execute();
          // Granted to agent-on-b; its ack never comes, and coord-b renews since the deadline: the attempt is withdrawn, its cancel left for coord-b.
          await run.send({ type: 'placement.granted', agentKind: 'static', jobKey: 'build', agentId: 'agent-on-b', dispatchId: randomUUID() });
          await run.fire('build', 'ack');
          const [commandId] = await eventually(async () => ((await cancelsLeftFor(db, runId)).length > 0 ? cancelsLeftFor(db, runId) : null), 10_000, 'the cancel left for coord-b');
          await eventually(() => waitingKind(owner, runId) === 'previous_attempt', 5_000, 'the owner to fence the job');
          assert.equal(jobState(owner, runId), 'withdrawing.fenced.waiting');

          adopter.registry.add(agentHere('agent-on-c'));
          await owner.stop();
          await eventually(() => adopter.supervisor.jobContext(runId, 'build') !== null, 10_000, 'coord-c to adopt the run');
          await sleep(600);
          const adopted = adopter.supervisor.jobContext(runId, 'build');
          assert.equal(adopted?.assignment, null, 'not placed on the free agent while the cancel of the previous attempt waits');
          assert.equal(waitingKind(adopter, runId), 'previous_attempt');
          assert.match(jobState(adopter, runId) ?? '', /^withdrawing\.fenced\./, 'the fence came back with the run: a state of its chart');

          await db.deleteFrom('agent_outbox').where('id', '=', commandId as number).execute();
          await eventually(() => adopter.supervisor.jobContext(runId, 'build')?.assignment?.agentId === 'agent-on-c', 5_000, 'the grant once the cancel went out');
        } finally {
          peer.stop();
          await owner.stop();
          await adopter.stop();
        }
      });
    });
  });
}
