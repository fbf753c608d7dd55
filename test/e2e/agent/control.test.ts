import assert from 'node:assert/strict';
import { afterEach, describe, it } from 'node:test';
import type { AgentMessage } from '../../../src/ws/messages.ts';
import { alive, cleanup, dispatchFor, spawnAgent, startAgent, step, waitUntil, AGENT_TOKEN } from './fixtures.ts';
import { ScriptedOrchestrator, type PeerConnection } from './scripted-orchestrator.ts';

/** Pids the step printed as `pid=<n>` lines. */
function printedPids(messages: AgentMessage[]): number[] {
  const lines = messages.flatMap((m) => (m.type === 'log.chunk' ? m.lines : []));
  return lines.flatMap((line) => (line.startsWith('pid=') ? [Number(line.slice(4))] : []));
}

async function waitForPids(peer: PeerConnection, jobId: string, count: number): Promise<number[]> {
  await waitUntil(() => printedPids(peer.forJob(jobId)).length >= count, 10_000, 'the step to print its pids');
  return printedPids(peer.forJob(jobId));
}

/** A step that ignores SIGTERM, with a grandchild that does too; both print their pid. */
const STUBBORN = "trap '' TERM; sleep 300 & echo pid=$!; echo pid=$$; wait";

describe('reference agent: cancel, capacity and drain', () => {
  let orchestrator: ScriptedOrchestrator;

  afterEach(async () => {
    await cleanup();
    await orchestrator.close();
  });

  async function registeredAgent(options: Parameters<typeof startAgent>[1] = {}) {
    orchestrator = await ScriptedOrchestrator.start();
    await startAgent(orchestrator.url, options);
    const peer = await orchestrator.connection(0);
    await peer.handshake();
    return peer;
  }

  it('graceful cancel sends SIGTERM to the whole process group and reports cancelled', async () => {
    const peer = await registeredAgent();
    const dispatch = dispatchFor(undefined, [
      step('trapping', 'trap "echo got-term; exit 143" TERM; sleep 300 & echo pid=$!; wait'),
      step('never', 'echo never'),
    ]);
    peer.send(dispatch);
    const [grandchild] = await waitForPids(peer, dispatch.jobId, 1);
    peer.send({ type: 'job.cancel', messageId: 'c1', runId: dispatch.runId, jobId: dispatch.jobId, reason: 'user asked' });
    const status = await peer.next('job.status', (m) => m.jobId === dispatch.jobId && m.state !== 'running');
    assert.equal(status.state, 'cancelled');
    assert.equal(status.data?.error, 'user asked');
    const lines = peer.forJob(dispatch.jobId).flatMap((m) => (m.type === 'log.chunk' ? m.lines : []));
    assert.ok(lines.includes('got-term'), 'the step saw SIGTERM');
    const stepStates = peer.forJob(dispatch.jobId).flatMap((m) => (m.type === 'step.status' ? [`${m.stepIndex}:${m.state}`] : []));
    assert.deepEqual(stepStates, ['0:running', '0:cancelled', '1:skipped']);
    await waitUntil(() => !alive(grandchild ?? 0), 5000, 'the grandchild to die');
  });

  it('graceful cancel escalates to SIGKILL after gracePeriod for processes that ignore SIGTERM', async () => {
    const peer = await registeredAgent();
    const dispatch = dispatchFor(undefined, [step('stubborn', STUBBORN)]);
    peer.send(dispatch);
    const pids = await waitForPids(peer, dispatch.jobId, 2);
    const cancelledAt = Date.now();
    peer.send({ type: 'job.cancel', messageId: 'c1', runId: dispatch.runId, jobId: dispatch.jobId, reason: 'stop' });
    await new Promise((resolve) => setTimeout(resolve, 500));
    assert.ok(pids.every(alive), 'SIGTERM is ignored during the grace period');
    const status = await peer.next('job.status', (m) => m.jobId === dispatch.jobId && m.state !== 'running');
    assert.equal(status.state, 'cancelled');
    assert.ok(Date.now() - cancelledAt >= 1000, 'waited gracePeriod (1 s) before SIGKILL');
    await waitUntil(() => !pids.some(alive), 5000, 'the tree to die');
  });

  it('force cancel kills the tree at once, without waiting for the grace period', async () => {
    const peer = await registeredAgent();
    const dispatch = dispatchFor(undefined, [step('stubborn', STUBBORN)], { jobConfig: { gracePeriod: 60, checkout: false } });
    peer.send(dispatch);
    const pids = await waitForPids(peer, dispatch.jobId, 2);
    const cancelledAt = Date.now();
    peer.send({ type: 'job.cancel', messageId: 'c1', runId: dispatch.runId, jobId: dispatch.jobId, reason: 'not owned', force: true });
    const status = await peer.next('job.status', (m) => m.jobId === dispatch.jobId && m.state !== 'running');
    assert.equal(status.state, 'cancelled');
    assert.ok(Date.now() - cancelledAt < 5000);
    await waitUntil(() => !pids.some(alive), 5000, 'the tree to die');
    const stepStatus = peer.forJob(dispatch.jobId).find((m) => m.type === 'step.status' && m.state === 'cancelled');
    assert.ok(stepStatus?.type === 'step.status');
    assert.equal(stepStatus.data?.error?.signal, 'SIGKILL');
  });

  it('ignores a cancel for an unknown job and a second dispatch of a running jobId', async () => {
    const peer = await registeredAgent({ maxConcurrency: 2 });
    peer.send({ type: 'job.cancel', messageId: 'c0', runId: 'r', jobId: 'unknown', reason: 'x' });
    const dispatch = dispatchFor(undefined, [step('short', 'sleep 0.3')]);
    peer.send(dispatch);
    peer.send(dispatch);
    await peer.next('job.status', (m) => m.jobId === dispatch.jobId && m.state === 'success');
    assert.equal(peer.forJob(dispatch.jobId).filter((m) => m.type === 'job.ack').length, 1);
  });

  it('rejects a dispatch with busy when every slot is taken', async () => {
    const peer = await registeredAgent({ maxConcurrency: 1 });
    const first = dispatchFor(undefined, [step('long', 'sleep 30')]);
    peer.send(first);
    await peer.next('job.status', (m) => m.jobId === first.jobId && m.state === 'running');
    const second = dispatchFor(undefined, [step('other', 'true')]);
    peer.send(second);
    const reject = await peer.next('job.reject', (m) => m.jobId === second.jobId);
    assert.equal(reject.reason, 'busy');
    assert.equal(reject.runId, second.runId);
    assert.deepEqual(peer.forJob(second.jobId).map((m) => m.type), ['job.reject']);
    await peer.next('agent.status', (m) => m.activeJobs === 1);
    peer.send({ type: 'job.cancel', messageId: 'c', runId: first.runId, jobId: first.jobId, reason: 'done', force: true });
    await peer.next('job.status', (m) => m.jobId === first.jobId && m.state === 'cancelled');
  });

  it('answers a dispatch that fails the schema with ack and a failed status naming the field', async () => {
    const peer = await registeredAgent();
    const { repoUrl: _dropped, ...broken } = dispatchFor(undefined, [step('x', 'true')]);
    peer.socket.send(JSON.stringify(broken));
    const status = await peer.next('job.status', (m) => m.jobId === broken.jobId);
    assert.equal(status.state, 'failed');
    assert.match(status.data?.error ?? '', /invalid dispatch: job\.dispatch: repoUrl/);
  });

  it('waits for step approval: approved runs the step, rejected fails it', async () => {
    const peer = await registeredAgent({ jobHeartbeatMs: 50 });
    const approval = { clauses: [{ kind: 'team', value: 'ops' }], reason: 'ship it?', when: 'always' as const, timeoutSeconds: 60 };
    const dispatch = dispatchFor(undefined, [step('gated', 'echo shipped', { approval }), step('gated-again', 'echo never', { approval })]);
    peer.send(dispatch);
    const request = await peer.next('step.approval-request', (m) => m.jobId === dispatch.jobId && m.stepIndex === 0);
    assert.deepEqual([request.stepName, request.reason, request.timeoutSeconds, request.clauses], ['gated', 'ship it?', 60, approval.clauses]);
    const sinceRequest = () => peer.received.slice(peer.received.indexOf(request));
    await waitUntil(() => sinceRequest().some((m) => m.type === 'job.heartbeat'), 5000, 'job.heartbeat while waiting');
    const resolved = { type: 'step.approval-resolved', runId: dispatch.runId, jobId: dispatch.jobId } as const;
    peer.send({ ...resolved, requestId: request.messageId, stepIndex: 0, outcome: 'approved' });
    const second = await peer.next('step.approval-request', (m) => m.jobId === dispatch.jobId && m.stepIndex === 1);
    peer.send({ ...resolved, requestId: second.messageId, stepIndex: 1, outcome: 'rejected', reason: 'no' });
    const status = await peer.next('job.status', (m) => m.jobId === dispatch.jobId && m.state !== 'running');
    assert.equal(status.state, 'failed');
    assert.deepEqual(status.data?.stepResults?.map((r) => [r.name, r.status, r.error]), [
      ['gated', 'success', undefined],
      ['gated-again', 'failed', 'approval rejected'],
    ]);
  });

  it('without a token registers directly and ignores a dispatch sent before register.ack', async () => {
    orchestrator = await ScriptedOrchestrator.start();
    await startAgent(orchestrator.url, { token: undefined });
    const peer = await orchestrator.connection(0);
    const register = await peer.next('agent.register');
    assert.equal(peer.types()[0], 'agent.register');
    const early = dispatchFor(undefined, [step('early', 'true')]);
    peer.send(early);
    peer.send({ type: 'register.ack', agentId: register.agentId, labels: register.labels, scalerManaged: false });
    await peer.next('config.ack');
    const onTime = dispatchFor(undefined, [step('on-time', 'true')]);
    peer.send(onTime);
    await peer.next('job.status', (m) => m.jobId === onTime.jobId && m.state === 'success');
    assert.deepEqual(peer.forJob(early.jobId), []);
  });

  it('drains on SIGUSR1: finishes the running job, rejects new ones with draining, exits 0', async () => {
    orchestrator = await ScriptedOrchestrator.start();
    const agent = spawnAgent(['--url', orchestrator.url, '--token', AGENT_TOKEN, '--labels', 'linux', '--max-concurrency', '2']);
    const peer = await orchestrator.connection(0, 20_000);
    await peer.handshake();
    await peer.next('config.ack');
    const running = dispatchFor(undefined, [step('work', 'sleep 1; echo done')]);
    peer.send(running);
    await peer.next('job.status', (m) => m.jobId === running.jobId && m.state === 'running');
    agent.child.kill('SIGUSR1');
    await new Promise((resolve) => setTimeout(resolve, 200));
    const refused = dispatchFor(undefined, [step('late', 'true')]);
    peer.send(refused);
    const reject = await peer.next('job.reject', (m) => m.jobId === refused.jobId);
    assert.equal(reject.reason, 'draining');
    const status = await peer.next('job.status', (m) => m.jobId === running.jobId && m.state !== 'running');
    assert.equal(status.state, 'success');
    assert.equal(await agent.exited, 0, agent.stderr());
    assert.equal((await peer.closed).code, 1000);
  });
});
