import assert from 'node:assert/strict';
import { test } from 'node:test';
import { pino } from 'pino';
import { Registry } from 'prom-client';
import { EffectExecutor } from '../../../actors/runs/effect-executor.ts';
import { createRuntimeMetrics } from '../../../actors/runs/metrics.ts';
import type { Effect, EffectHandlers } from '../../../actors/runs/ports.ts';
import { ManualClock } from '../../support/manual-clock.ts';

function setup(handlers: Partial<EffectHandlers>) {
  const clock = new ManualClock();
  const done: string[] = [];
  const unexpected = () => {
    throw new Error('unexpected effect kind');
  };
  const table: EffectHandlers = {
    requestPlacement: unexpected,
    sendDispatch: unexpected,
    sendCancel: unexpected,
    askAckHolder: unexpected,
    checkCancelFence: unexpected,
    closeAgentConnection: unexpected,
    releaseSlot: unexpected,
    requestConcurrency: unexpected,
    releaseConcurrency: unexpected,
    answerConcurrency: unexpected,
    recordApprovalGate: unexpected,
    reportForgeStatus: unexpected,
    ...handlers,
  };
  const executor = new EffectExecutor({
    handlers: table,
    markDone: (ids) => Promise.resolve(void done.push(...ids)),
    clock,
    log: pino({ level: 'silent' }),
    metrics: createRuntimeMetrics(new Registry()),
  });
  return { clock, done, executor };
}

const release = (n: number): Effect<'releaseSlot'> => ({ effectId: `run-1:${n}:0`, runId: 'run-1', kind: 'releaseSlot', payload: { agentId: 'a', dispatchId: `d${n}` } });

test('each effect reaches the handler of its own kind, in the order its run committed them', async () => {
  const seen: string[] = [];
  const { clock, done, executor } = setup({
    releaseSlot: (effect) => void seen.push(`release ${effect.payload.dispatchId}`),
    requestConcurrency: (effect) => void seen.push(`concurrency ${effect.payload.key}`),
  });
  executor.execute([release(1), { effectId: 'run-1:2:0', runId: 'run-1', kind: 'requestConcurrency', payload: { jobKey: 'build', key: 'deploy', policy: { cancelInProgress: false, max: 1 } } }, release(3)]);
  await clock.advance(100);
  await executor.idle();
  assert.deepEqual(seen, ['release d1', 'concurrency deploy', 'release d3']);
  assert.deepEqual(done, ['run-1:1:0', 'run-1:2:0', 'run-1:3:0']);
});

test('a placement request runs in its run\'s order but is never marked done: it has no outbox row (a restore asks again)', async () => {
  const seen: string[] = [];
  const { clock, done, executor } = setup({
    releaseSlot: (effect) => void seen.push(`release ${effect.payload.dispatchId}`),
    requestPlacement: (effect) => void seen.push(`place ${effect.payload.jobKey}`),
  });
  const ask: Effect<'requestPlacement'> = { effectId: 'run-1:2:0', runId: 'run-1', kind: 'requestPlacement', payload: { jobKey: 'build', requirements: { runsOn: [], excludeLabels: [], runsOnPick: 'deterministic', executor: 'any' }, attempt: 1 } };
  executor.execute([release(1), ask, release(3)]);
  await clock.advance(100);
  await executor.idle();
  assert.deepEqual(seen, ['release d1', 'place build', 'release d3']);
  assert.deepEqual(done, ['run-1:1:0', 'run-1:3:0']);
});

test('an effect that keeps failing steps out of line and is re-driven until it succeeds', async () => {
  let failuresLeft = 8;
  const seen: string[] = [];
  const { clock, done, executor } = setup({
    releaseSlot: (effect) => {
      if (effect.payload.dispatchId === 'd1' && failuresLeft-- > 0) throw new Error('database away');
      seen.push(effect.payload.dispatchId);
    },
  });
  executor.execute([release(1), release(2)]);
  await clock.advance(2_000);
  assert.deepEqual(seen, ['d2'], 'the run\'s later effect is not held up by the failing one');
  assert.equal(executor.failingCount, 1);
  await clock.advance(60_000);
  assert.deepEqual(seen, ['d2', 'd1'], 'the failing effect ran once it could');
  assert.equal(executor.failingCount, 0);
  await executor.idle();
  assert.deepEqual(done.sort(), ['run-1:1:0', 'run-1:2:0']);
});

test('a stopped executor re-drives nothing more and leaves the effect in the outbox', async () => {
  let calls = 0;
  const { clock, done, executor } = setup({
    releaseSlot: () => {
      calls += 1;
      throw new Error('agent store away');
    },
  });
  executor.execute([release(1)]);
  await clock.advance(5_000);
  const before = calls;
  assert.ok(before >= 5);
  executor.stop();
  await clock.advance(120_000);
  assert.equal(calls, before);
  assert.equal(clock.timers, 0);
  assert.deepEqual(done, []);
});

const forgeStatus = (n: number, state: 'pending' | 'success'): Effect<'reportForgeStatus'> => ({
  effectId: `run-1:${n}:0`,
  runId: 'run-1',
  kind: 'reportForgeStatus',
  payload: { context: 'switchyard/ci', state, description: state },
});

test('a forge status that hangs holds up neither the run\'s other effects nor its own later status order', async () => {
  const seen: string[] = [];
  let answerPending: () => void = () => {};
  const { clock, done, executor } = setup({
    reportForgeStatus: (effect) => {
      seen.push(`status ${effect.payload.state} sent`);
      if (effect.payload.state !== 'pending') return;
      return new Promise<void>((resolve) => (answerPending = resolve));
    },
    releaseSlot: (effect) => void seen.push(`release ${effect.payload.dispatchId}`),
  });
  executor.execute([forgeStatus(1, 'pending'), release(2), forgeStatus(3, 'success'), release(4)]);
  await clock.advance(100);
  assert.deepEqual(seen, ['status pending sent', 'release d2', 'release d4'], 'the run\'s effects ran while the status request hangs');
  answerPending();
  await executor.idle();
  assert.deepEqual(seen, ['status pending sent', 'release d2', 'release d4', 'status success sent'], 'the final status follows the pending one');
  assert.deepEqual(done.sort(), ['run-1:1:0', 'run-1:2:0', 'run-1:3:0', 'run-1:4:0']);
});
