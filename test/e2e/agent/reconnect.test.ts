import assert from 'node:assert/strict';
import { afterEach, describe, it } from 'node:test';
import { CLOSE_CODES, type AgentMessage } from '../../../src/ws/messages.ts';
import { cleanup, dispatchFor, startAgent, step } from './fixtures.ts';
import { ScriptedOrchestrator } from './scripted-orchestrator.ts';

const COUNTING = 'for i in $(seq 1 12); do echo line-$i; sleep 0.1; done';
const ALL_LINES = Array.from({ length: 12 }, (_, i) => `line-${i + 1}`);

function lines(messages: AgentMessage[]): string[] {
  return messages.flatMap((m) => (m.type === 'log.chunk' && m.stepIndex === 0 ? m.lines : []));
}

describe('reference agent: reconnect', () => {
  let orchestrator: ScriptedOrchestrator;

  afterEach(async () => {
    await cleanup();
    await orchestrator.close();
  });

  it('re-registers with inFlightJobs after the socket drops mid-job and keeps every log line', async () => {
    orchestrator = await ScriptedOrchestrator.start();
    await startAgent(orchestrator.url, { jobHeartbeatMs: 50 });
    const first = await orchestrator.connection(0);
    await first.handshake();
    const dispatch = dispatchFor(undefined, [step('count', COUNTING)]);
    first.send(dispatch);
    await first.next('log.chunk', (m) => m.jobId === dispatch.jobId);
    first.socket.terminate();

    const second = await orchestrator.connection(1);
    const register = await second.handshake();
    assert.deepEqual(register.inFlightJobs, [{ jobId: dispatch.jobId, runId: dispatch.runId }]);
    const status = await second.next('job.status', (m) => m.jobId === dispatch.jobId && m.state !== 'running');
    assert.equal(status.state, 'success');
    assert.deepEqual([...lines(first.forJob(dispatch.jobId)), ...lines(second.forJob(dispatch.jobId))], ALL_LINES);
    assert.ok(second.forJob(dispatch.jobId).some((m) => m.type === 'job.heartbeat'), 'job heartbeats continue');
  });

  it('buffers logs while disconnected, keeps the terminal status and sends both after register.ack', async () => {
    orchestrator = await ScriptedOrchestrator.start();
    await startAgent(orchestrator.url, { jobHeartbeatMs: 100 });
    const first = await orchestrator.connection(0);
    await first.handshake();
    const dispatch = dispatchFor(undefined, [step('count', COUNTING)]);
    first.send(dispatch);
    await first.next('log.chunk', (m) => m.jobId === dispatch.jobId);
    first.socket.terminate();

    // Hold the next handshake until the job has finished while the agent was not registered.
    const second = await orchestrator.connection(1);
    await second.next('auth.request');
    await new Promise((resolve) => setTimeout(resolve, 2000));
    assert.deepEqual(second.types(), ['auth.request'], 'nothing but auth before the handshake completes');
    const register = await second.handshake();
    assert.deepEqual(register.inFlightJobs, [{ jobId: dispatch.jobId, runId: dispatch.runId }], 'the finished job is still owed');

    const status = await second.next('job.status', (m) => m.jobId === dispatch.jobId);
    assert.equal(status.state, 'success');
    const afterAck = second.received.slice(second.types().indexOf('agent.register') + 1);
    assert.equal(afterAck[0]?.type, 'agent.log', 'the gap marker comes first');
    assert.match(afterAck[0]?.type === 'agent.log' ? (afterAck[0].lines[0] ?? '') : '', /^Orchestrator offline for \d+s\. Replaying/);
    const statusIndex = afterAck.indexOf(status);
    const lastChunk = afterAck.findLastIndex((m) => m.type === 'log.chunk');
    assert.ok(lastChunk >= 0 && lastChunk < statusIndex, 'buffered logs are replayed before the stored status');
    assert.ok(afterAck.some((m) => m.type === 'step.status' && m.state === 'success'), 'step statuses are replayed');
    assert.deepEqual([...lines(first.forJob(dispatch.jobId)), ...lines(second.forJob(dispatch.jobId))], ALL_LINES);
    const chunkTimes = afterAck.flatMap((m) => (m.type === 'log.chunk' ? [m.timestamp] : []));
    assert.ok(chunkTimes.every((t) => t < status.timestamp), 'replayed chunks keep their original timestamps');
    assert.ok(afterAck.some((m) => m.type === 'job.heartbeat' && m.jobId === dispatch.jobId), 'heartbeats were buffered too');
  });

  it('does not reconnect after auth.failure and close 4010, and exits 3', async () => {
    orchestrator = await ScriptedOrchestrator.start();
    const { exited } = await startAgent(orchestrator.url);
    const peer = await orchestrator.connection(0);
    await peer.next('auth.request');
    peer.send({ type: 'auth.failure', reason: 'Invalid or expired token' });
    peer.socket.close(CLOSE_CODES.AUTH_FAILED, 'Invalid or expired token');
    assert.equal(await exited, 3);
    await new Promise((resolve) => setTimeout(resolve, 500));
    assert.equal(orchestrator.connections.length, 1);
  });

  it('reconnects with backoff after other close codes', async () => {
    orchestrator = await ScriptedOrchestrator.start();
    await startAgent(orchestrator.url);
    const first = await orchestrator.connection(0);
    await first.handshake();
    first.socket.close(CLOSE_CODES.GOING_AWAY, 'restart');
    const second = await orchestrator.connection(1);
    await second.handshake();
    first.socket.close(CLOSE_CODES.INVALID_MESSAGE);
    second.socket.close(CLOSE_CODES.DISPATCH_ACK_TIMEOUT, 'ack timeout');
    const third = await orchestrator.connection(2);
    assert.ok((await third.handshake()).agentId === (await second.next('agent.register')).agentId);
  });
});
