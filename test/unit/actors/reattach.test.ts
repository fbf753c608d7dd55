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
      reattachRuns({ supervisor: { jobsOf: () => [] }, deliver, shared: { isConnectedAnywhere: () => Promise.resolve(false) }, log: pino({ level: 'silent' }) }, runIds),
      timeout,
    ]);
  } finally {
    clearTimeout(timer);
  }
  assert.deepEqual(told, runIds);
});
