import assert from 'node:assert/strict';
import { it } from 'node:test';
import { pino } from 'pino';
import { reattachRuns } from '../../../actors/runs/reattach.ts';

it('restored runs are told together, so their events share commits instead of waiting one after another', async () => {
  const runIds = Array.from({ length: 100 }, (_, i) => `run-${i}`);
  const told: string[] = [];
  let durable!: () => void;
  // Like a group commit: nothing is durable until the batch holding every run's event commits.
  const batch = new Promise<void>((resolve) => (durable = resolve));
  const deliver = (runId: string) => {
    told.push(runId);
    if (told.length === runIds.length) durable();
    return batch;
  };
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise((_, reject) => (timer = setTimeout(() => reject(new Error(`only ${told.length} runs told before the first was durable`)), 2_000)));
  try {
    await Promise.race([
      reattachRuns({ supervisor: { jobsOf: () => [] }, deliver, shared: { isConnectedAnywhere: () => Promise.resolve(false) }, registry: { get: () => undefined }, log: pino({ level: 'silent' }) }, runIds),
      timeout,
    ]);
  } finally {
    clearTimeout(timer);
  }
  assert.deepEqual(told, runIds);
});

it('an agent that registers here while the run is being looked at counts as live: its reclaim went first and is not undone', async () => {
  const connected = new Set<string>();
  const told: { runId: string; liveAgents: string[] }[] = [];
  const job = { jobKey: 'build', context: { assignment: { agentId: 'agent-1' } } } as unknown as ReturnType<Parameters<typeof reattachRuns>[0]['supervisor']['jobsOf']>[number];
  await reattachRuns(
    {
      supervisor: { jobsOf: () => [job] },
      deliver: (runId, event) => Promise.resolve(void told.push({ runId, liveAgents: (event as { liveAgents: string[] }).liveAgents })),
      // Not connected when the shared table is read; it registers here (and reclaims) before that read returns.
      shared: { isConnectedAnywhere: () => Promise.resolve(false).finally(() => connected.add('agent-1')) },
      registry: { get: (agentId) => (connected.has(agentId) ? ({ agentId } as never) : undefined) },
      log: pino({ level: 'silent' }),
    },
    ['run-1'],
  );
  assert.deepEqual(told, [{ runId: 'run-1', liveAgents: ['agent-1'] }]);
});
