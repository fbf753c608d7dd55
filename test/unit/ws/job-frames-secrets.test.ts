import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { pino } from 'pino';
import { AgentRegistry } from '../../../actors/agents/registry.ts';
import type { IncomingRunEvent } from '../../../actors/runs/supervisor.ts';
import type { LogChunkInput } from '../../../src/db/job-logs.ts';
import type { SecretOutputRow } from '../../../src/db/secrets.ts';
import { DispatchedSecrets } from '../../../src/secrets/dispatched.ts';
import { JobFrames, type JobScopedMessage } from '../../../src/ws/job-messages.ts';

const NOW = 5_000_000;
const ids = { runId: 'run-1', jobId: 'd-1' };
const owned = { 'd-1': { runId: 'run-1', jobKey: 'build', agentId: 'a-1', endedAt: null } };
const tick = () => new Promise((resolve) => setImmediate(resolve));

function harness(dispatched: DispatchedSecrets) {
  const events: IncomingRunEvent[] = [];
  const chunks: LogChunkInput[] = [];
  const stored: SecretOutputRow[][] = [];
  let release: () => void = () => undefined;
  const outputsStored = new Promise<void>((resolve) => (release = resolve));
  const frames = new JobFrames({
    registry: new AgentRegistry(() => NOW),
    deliver: (_runId, event) => {
      events.push(event);
      return Promise.resolve();
    },
    lookupDispatch: (dispatchId) => Promise.resolve(owned[dispatchId as 'd-1'] ?? null),
    appendLogs: (batch) => {
      chunks.push(...batch);
      return Promise.resolve();
    },
    now: () => NOW,
    log: pino({ level: 'silent' }),
    dispatchedSecrets: dispatched,
    storeSecretOutputs: (rows) => {
      stored.push(rows);
      return outputsStored;
    },
  });
  return { frames, events, chunks, stored, release };
}

describe('job frames mask with the attempt’s secret values and store secret outputs first (SEC-4, SEC-5)', () => {
  it('log lines, step errors, job errors and step results are masked with the values sent to that attempt only', async () => {
    const dispatched = new DispatchedSecrets(1_000);
    dispatched.remember('d-1', ['s3cr3t-value', 'abc']);
    dispatched.remember('d-other', ['not-this-one']);
    const { frames, events, chunks } = harness(dispatched);
    const frame = (message: object) => frames.handle('a-1', { ...ids, messageId: 'm', timestamp: NOW, ...message } as JobScopedMessage);
    await frame({ type: 'log.chunk', stepIndex: 0, lines: ['x s3cr3t-value y', 'abc is short', 'not-this-one'] });
    await frame({ type: 'step.status', stepIndex: 0, stepName: 's', state: 'failed', data: { error: { message: 'bad s3cr3t-value' } } });
    await frame({ type: 'job.status', state: 'failed', data: { error: 'job s3cr3t-value', stepResults: [{ name: 's', status: 'failed', durationMs: 1, error: 'r s3cr3t-value' }] } });
    await tick();
    assert.deepEqual(chunks.flatMap((c) => c.lines), ['x *** y', 'abc is short', 'not-this-one']);
    const step = events.find((e) => e.type === 'agent.step.status') as { step: { error: string } };
    assert.equal(step.step.error, 'bad ***');
    const status = events.find((e) => e.type === 'agent.job.status') as { error: string; data: { stepResults: { error: string }[] } };
    assert.equal(status.error, 'job ***');
    assert.equal(status.data.stepResults[0]?.error, 'r ***');
  });

  it('a successful status with secretOutputs is delivered only once they are stored as received', async () => {
    const { frames, events, stored, release } = harness(new DispatchedSecrets(1_000));
    const secretOutputs = { TOKEN: { agentPublicKey: 'pk', encrypted: 'ct' } };
    await frames.handle('a-1', { type: 'job.status', messageId: 'm', ...ids, state: 'success', timestamp: NOW, secretOutputs });
    await tick();
    assert.deepEqual(stored, [[{ runId: 'run-1', jobKey: 'build', name: 'TOKEN', dispatchId: 'd-1', agentPublicKey: 'pk', encrypted: 'ct', createdAt: NOW }]]);
    assert.equal(events.length, 0, 'the status waits for the outputs');
    release();
    await tick();
    assert.deepEqual(events.map((e) => e.type), ['agent.job.status']);
  });

  it('a failed status’s secretOutputs are not kept', async () => {
    const { frames, events, stored } = harness(new DispatchedSecrets(1_000));
    await frames.handle('a-1', { type: 'job.status', messageId: 'm', ...ids, state: 'failed', timestamp: NOW, secretOutputs: { T: { agentPublicKey: 'pk', encrypted: 'ct' } } });
    await tick();
    assert.deepEqual(stored, []);
    assert.equal(events.length, 1);
  });
});
