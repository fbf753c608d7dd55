import assert from 'node:assert/strict';
import { it } from 'node:test';
import { claimCoordinatorLease } from '../../../src/db/coordinator-lease.ts';
import { agentCommandsWaiting, deleteAgentCommands, peekAgentCommands, sendAgentCommand } from '../../../src/db/shared-agents.ts';
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
});
