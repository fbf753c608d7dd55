import assert from 'node:assert/strict';
import { it } from 'node:test';
import { claimCoordinatorLease } from '../../../src/db/coordinator-lease.ts';
import { agentCancelsWaitingFor, agentCommandsWaiting, deleteAgentCommands, peekAgentCommands, sendAgentCommand } from '../../../src/db/shared-agents.ts';
import { describeEachKind, withTestDatabase } from '../../support/database.ts';

const cancel = { kind: 'frame' as const, frame: { type: 'job.cancel', runId: 'r1', jobId: 'd-1', reason: 'dispatch ack timeout', force: true }, dispatchId: null };

await describeEachKind('commands left for the coordinator holding an agent', (kind) => {
  it('a command waits until its coordinator carries it out, or until that coordinator’s lease runs out', () =>
    withTestDatabase(kind, async ({ db }) => {
      await claimCoordinatorLease(db, { id: 'coord-b', ttlMs: 1_000, now: 0 });
      const first = await sendAgentCommand(db, { coordinatorId: 'coord-b', agentId: 'agent-1', command: cancel, now: 10 });
      const second = await sendAgentCommand(db, { coordinatorId: 'coord-b', agentId: 'agent-1', command: cancel, now: 20 });
      assert.ok(second > first, 'each send names its own row');
      assert.deepEqual((await peekAgentCommands(db, 'coord-b', 10)).map((c) => c.id), [first, second]);
      const waiting = async (now: number) => [...(await agentCommandsWaiting(db, { ids: [first, second], now }))].sort((a, b) => a - b);
      assert.deepEqual(await waiting(500), [first, second]);
      await deleteAgentCommands(db, [first]);
      assert.deepEqual(await waiting(500), [second], 'the first carried out');
      assert.deepEqual(await waiting(1_000), [second], 'the lease ends once now has passed it');
      assert.deepEqual(await waiting(1_001), [], 'its coordinator is dead: the agent’s socket went with it');
      assert.deepEqual([...(await agentCommandsWaiting(db, { ids: [], now: 0 }))], []);
    }));

  it('the cancels of restored runs still waiting on a live peer, with the job each cancels (a takeover raises their fences again)', () =>
    withTestDatabase(kind, async ({ db }) => {
      for (const id of ['coord-a', 'coord-b']) await claimCoordinatorLease(db, { id, ttlMs: 1_000, now: 0 });
      await claimCoordinatorLease(db, { id: 'coord-dead', ttlMs: 100, now: 0 });
      const send = (coordinatorId: string, runId: string, jobKey?: string) =>
        sendAgentCommand(db, { coordinatorId, agentId: `agent-on-${coordinatorId}`, command: { ...cancel, ...(jobKey && { cancels: { runId, jobKey } }) }, now: 50 });
      const waitingOnB = await send('coord-b', 'r1', 'build');
      const laterOnB = await send('coord-b', 'r1', 'test');
      await send('coord-b', 'r9', 'build');
      await send('coord-dead', 'r1', 'lint');
      await send('coord-a', 'r2', 'build');
      await send('coord-b', 'r2');
      const waiting = await agentCancelsWaitingFor(db, { runIds: ['r1', 'r2'], me: 'coord-a', now: 500 });
      assert.deepEqual(waiting, [
        { commandId: waitingOnB, coordinatorId: 'coord-b', agentId: 'agent-on-coord-b', runId: 'r1', jobKey: 'build', sentAt: 50 },
        { commandId: laterOnB, coordinatorId: 'coord-b', agentId: 'agent-on-coord-b', runId: 'r1', jobKey: 'test', sentAt: 50 },
      ], 'not another run’s, not a dead coordinator’s, not one left for this coordinator’s previous process, not a frame that cancels nothing');
      await deleteAgentCommands(db, [waitingOnB]);
      assert.deepEqual((await agentCancelsWaitingFor(db, { runIds: ['r1'], me: 'coord-a', now: 500 })).map((c) => c.jobKey), ['test'], 'carried out: gone');
      assert.deepEqual(await agentCancelsWaitingFor(db, { runIds: [], me: 'coord-a', now: 500 }), []);
    }));
});
