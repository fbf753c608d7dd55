import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { pino } from 'pino';
import { AgentRegistry, LATE_MESSAGE_GRACE_MS, type DispatchRecord } from '../../../actors/agents/registry.ts';
import type { IncomingRunEvent } from '../../../actors/runs/supervisor.ts';
import type { LogChunkInput } from '../../../src/db/job-logs.ts';
import { JobFrames, type JobScopedMessage } from '../../../src/ws/job-messages.ts';
import { runnerStepOf } from '../../../src/ws/job-reports.ts';

const NOW = 5_000_000;

/** A promise with its resolve and reject in hand, to decide when a "commit" or a "log write" finishes. */
function deferred() {
  let resolve: () => void = () => undefined;
  let reject: (error: Error) => void = () => undefined;
  const promise = new Promise<void>((res, rej) => ([resolve, reject] = [res, rej]));
  return { promise, resolve, reject };
}

function harness(records: Record<string, DispatchRecord>) {
  const logged: { msg: string; runId?: string; event?: string; err?: { message: string } }[] = [];
  const delivered: string[] = [];
  const commits: ReturnType<typeof deferred>[] = [];
  const writes: { chunks: readonly LogChunkInput[]; done: ReturnType<typeof deferred> }[] = [];
  const frames = new JobFrames({
    registry: new AgentRegistry(() => NOW),
    deliver: (_runId: string, event: IncomingRunEvent) => {
      delivered.push(event.type);
      const commit = deferred();
      commits.push(commit);
      return commit.promise;
    },
    lookupDispatch: (dispatchId) => Promise.resolve(records[dispatchId] ?? null),
    appendLogs: (chunks) => {
      const done = deferred();
      writes.push({ chunks, done });
      return done.promise;
    },
    now: () => NOW,
    log: pino({ level: 'warn' }, { write: (line: string) => void logged.push(JSON.parse(line) as (typeof logged)[number]) }),
  });
  return { frames, delivered, commits, writes, logged };
}

const ids = { runId: 'run-1', jobId: 'd-1' };
const ack: JobScopedMessage = { type: 'job.ack', messageId: 'm1', ...ids, timestamp: NOW };
const running: JobScopedMessage = { type: 'job.status', messageId: 'm2', ...ids, state: 'running', timestamp: NOW };
const success: JobScopedMessage = { type: 'job.status', messageId: 'm3', ...ids, state: 'success', timestamp: NOW };
const chunk: JobScopedMessage = { type: 'log.chunk', messageId: 'm4', ...ids, stepIndex: 0, lines: ['hello'], timestamp: NOW };
const owned = { 'd-1': { runId: 'run-1', jobKey: 'build', agentId: 'a-1', endedAt: null } };
const tick = () => new Promise((resolve) => setImmediate(resolve));

describe('job frames of one connection: mailbox order without waiting for commits (burst livelock)', () => {
  it('every frame is put in the mailbox in order while no commit has finished', async () => {
    const { frames, delivered, commits } = harness(owned);
    for (const frame of [ack, running, success]) assert.deepEqual(await frames.handle('a-1', frame), { ok: true });
    assert.deepEqual(delivered, ['agent.job.ack', 'agent.job.status', 'agent.job.status']);
    assert.equal(commits.length, 3, 'none of them was waited for');
  });

  it('the checkout run events become the runner step (index -1): running, then done with its duration; other run events are not steps', async () => {
    const { frames, delivered } = harness(owned);
    const runEvent = (eventType: string, durationMs: number | null, metadata?: Record<string, unknown>) =>
      ({ type: 'run.event', ...ids, eventType, timestampMs: NOW, sourceService: 'agent', durationMs, ...(metadata && { metadata }) }) as const;
    for (const frame of [runEvent('agent.clone.start', null), runEvent('agent.clone.end', 24), runEvent('agent.execution.start', null)]) await frames.handle('a-1', frame);
    assert.deepEqual(delivered, ['agent.step.status', 'agent.step.status']);
    const runner = { index: -1, name: 'runner', hook: null, exitCode: null };
    assert.deepEqual(runnerStepOf(runEvent('agent.clone.start', null)), { ...runner, status: 'running', durationMs: null, error: null });
    assert.deepEqual(runnerStepOf(runEvent('agent.clone.end', 24)), { ...runner, status: 'success', durationMs: 24, error: null }, "the stock agent's: no metadata");
    assert.deepEqual(runnerStepOf(runEvent('agent.clone.end', 31, { success: false })), { ...runner, status: 'failed', durationMs: 31, error: 'checkout failed' });
    assert.equal(runnerStepOf(runEvent('agent.teardown', null)), null);
  });

  it('a failed delivery is logged, never an unhandled rejection', async () => {
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => void unhandled.push(reason);
    process.on('unhandledRejection', onUnhandled);
    try {
      const { frames, commits, logged } = harness(owned);
      await frames.handle('a-1', ack);
      commits[0]?.reject(new Error('supervisor stopped'));
      await tick();
      await tick();
      assert.deepEqual(
        logged.map(({ msg, runId, event, err }) => ({ msg, runId, event, error: err?.message })),
        [{ msg: 'agent event delivery failed', runId: 'run-1', event: 'agent.job.ack', error: 'supervisor stopped' }],
      );
      assert.deepEqual(unhandled, []);
    } finally {
      process.off('unhandledRejection', onUnhandled);
    }
  });

  it('log chunks are written in batches without holding up frames; a terminal status waits for its lines, later events of its run queue behind it', async () => {
    const { frames, delivered, writes } = harness(owned);
    await frames.handle('a-1', chunk);
    await frames.handle('a-1', { ...chunk, messageId: 'm5', lines: ['world'] });
    await frames.handle('a-1', success);
    await frames.handle('a-1', { type: 'job.heartbeat', ...ids, timestamp: NOW });
    assert.deepEqual(delivered, [], 'the terminal status waits for the log lines, and the heartbeat after it');
    assert.equal(writes.length, 1, 'one write in flight');
    writes[0]?.done.resolve();
    await tick();
    assert.deepEqual(writes[1]?.chunks.map((c) => c.lines), [['world']], 'what arrived meanwhile is the next batch');
    assert.deepEqual(delivered, [], 'still waiting for the second batch');
    writes[1]?.done.resolve();
    await tick();
    assert.deepEqual(delivered, ['agent.job.status', 'agent.job.heartbeat']);
  });

  it('ownership causes: another agent’s attempt, this agent’s own attempt long over, and an unknown one', async () => {
    const ended = NOW - LATE_MESSAGE_GRACE_MS - 1;
    const { frames, delivered } = harness({
      ...owned,
      'd-other': { runId: 'run-2', jobKey: 'build', agentId: 'a-2', endedAt: null },
      'd-old': { runId: 'run-3', jobKey: 'build', agentId: 'a-1', endedAt: ended },
      'd-late': { runId: 'run-4', jobKey: 'build', agentId: 'a-1', endedAt: NOW - 1_000 },
    });
    const status = (jobId: string): JobScopedMessage => ({ ...success, jobId });
    assert.deepEqual(await frames.handle('a-1', status('d-other')), { ok: false, cause: 'other_agent' });
    assert.deepEqual(await frames.handle('a-1', status('d-old')), { ok: false, cause: 'ended' });
    assert.deepEqual(await frames.handle('a-1', status('d-none')), { ok: false, cause: 'unknown' });
    assert.deepEqual(await frames.handle('a-1', status('d-late')), { ok: true }, 'within the late-message grace');
    assert.deepEqual(delivered, ['agent.job.status']);
  });
});
