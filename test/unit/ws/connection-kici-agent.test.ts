import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, describe, it } from 'node:test';
import { pino } from 'pino';
import { AgentRegistry, type DispatchRecord } from '../../../actors/agents/registry.ts';
import type { IncomingRunEvent } from '../../../actors/runs/supervisor.ts';
import type { ConnectionDeps } from '../../../src/ws/connection.ts';
import { AgentRequests } from '../../../src/ws/agent-requests.ts';
import { CLOSE_CODES, dispatchSchema } from '../../../src/ws/messages.ts';
import type { JobDispatch } from '../../../src/ws/messages.ts';
import { attachAgentServer } from '../../../src/ws/server.ts';
import { FakeAgent } from '../../support/fake-agent.ts';
import { KiciTestAgent, type KiciTestAgentOptions } from '../../support/kici-agent.ts';
import { hold } from '../../support/kici-agent-scripts.ts';
import { wireRecords } from '../../support/kici-wire-fixture.ts';

const GOOD_TOKEN = `kat_${'a'.repeat(64)}`;

/** A real AgentConnection behind a real socket, with the run side reduced to recording lists. */
async function coordinatorSide(authMode: 'token' | 'none', extra: Partial<ConnectionDeps> = {}) {
  const registry = new AgentRegistry();
  const records = new Map<string, DispatchRecord>();
  const seen = { delivered: [] as IncomingRunEvent[], logs: [] as string[][], invalidInformational: [] as string[], unknown: [] as string[], reclaimed: [] as string[], metricsFrom: [] as string[] };
  const deps: ConnectionDeps = {
    ...{ authMode, silentMs: 90_000, registry, now: Date.now, log: pino({ level: 'silent' }), onViolation: () => undefined },
    requests: new AgentRequests({ lookupDispatch: (dispatchId) => Promise.resolve(records.get(dispatchId) ?? null), sourceOf: () => Promise.resolve(null), caches: null, attestations: null, builds: null, idTokens: null, events: { emit: () => Promise.resolve({ error: 'no run has a source here' }) }, now: Date.now, log: pino({ level: 'silent' }) }),
    validateToken: (token) => Promise.resolve(token === GOOD_TOKEN ? { id: 't1', agentType: 'static', labels: null, mandatoryLabels: [], createdBy: null } : null),
    deliver: (_runId, event) => Promise.resolve(seen.delivered.push(event)),
    lookupDispatch: (dispatchId) => Promise.resolve(records.get(dispatchId) ?? null),
    appendLogs: (chunks) => Promise.resolve(void seen.logs.push(...chunks.map((chunk) => [...chunk.lines]))),
    reclaim: (_session, inFlight) => Promise.resolve(void seen.reclaimed.push(...inFlight.map((job) => job.jobId))),
    onUnknownType: (type) => seen.unknown.push(type),
    onInvalidInformational: (type) => seen.invalidInformational.push(type),
    onAgentMetrics: (agentId) => seen.metricsFrom.push(agentId),
    ...extra,
  };
  const server = createServer();
  const agents = attachAgentServer(server, deps, deps.log);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `ws://127.0.0.1:${(server.address() as AddressInfo).port}/ws/agent`;
  /** Sends a dispatch built from a recorded one, as the owner record says `agentId` runs it. */
  const dispatch = (agentId: string, patch: Partial<JobDispatch> = {}): JobDispatch => {
    const recorded = wireRecords().find((r) => r.msg.type === 'job.dispatch' && r.msg['sourceTarUrl'] !== undefined)?.msg;
    const frame = dispatchSchema.parse({ ...recorded, messageId: randomUUID(), runId: randomUUID(), jobId: randomUUID(), timestamp: Date.now(), ...patch });
    records.set(frame.jobId, { runId: frame.runId, jobKey: 'one', agentId, endedAt: null });
    const session = registry.get(agentId);
    assert.ok(session, `${agentId} is registered`);
    session.link.send(frame);
    return frame;
  };
  const send = (agentId: string, frame: object) => registry.get(agentId)?.link.send(frame);
  const close = async () => {
    await agents.close();
    await new Promise((resolve) => server.close(resolve));
  };
  return { url, seen, dispatch, send, close };
}

/** Waits until the coordinator side has seen what the agent already sent (the socket is asynchronous). */
async function settled(check: () => boolean, what: string): Promise<void> {
  for (let tries = 0; !check(); tries += 1) {
    if (tries > 2000) throw new Error(`never settled: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

const cleanups: (() => Promise<void>)[] = [];
after(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function setup(authMode: 'token' | 'none' = 'none', extra: Partial<ConnectionDeps> = {}) {
  const side = await coordinatorSide(authMode, extra);
  cleanups.push(side.close);
  return side;
}

function agentFor(url: string, options: Partial<KiciTestAgentOptions> = {}): KiciTestAgent {
  const agent = new KiciTestAgent({ url, labels: ['lab'], paceMs: 1, ...options });
  cleanups.push(() => agent.close());
  return agent;
}

describe('AgentConnection: informational frames never close the socket', () => {
  it('a broken job.context, agent.log, agent.metrics, agent.status, run.event or config.ack is counted; no error, socket open', async () => {
    const side = await setup();
    const agent = await FakeAgent.connect(side.url, null);
    cleanups.push(() => agent.close());
    const broken = [
      { type: 'job.context', runId: 'r', jobId: 'j', context: 'none' },
      { type: 'agent.log', agentId: agent.agentId, lines: 'one' },
      { type: 'agent.metrics', agentId: agent.agentId, metrics: [{ type: 'gauge' }] },
      { type: 'agent.status', messageId: 'm', agentId: agent.agentId },
      { type: 'run.event', runId: 'r', eventType: '', timestampMs: 1, sourceService: 'agent', jobId: null, durationMs: null },
      { type: 'config.ack', agentId: agent.agentId },
    ];
    for (const frame of broken) agent.send(frame);
    const requestId = randomUUID();
    agent.send({ type: 'agent.api.request', requestId, method: 'ping' });
    assert.equal((await agent.next('agent.api.response')).requestId, requestId, 'frames after them are still served');
    assert.ok(agent.isOpen);
    assert.ok(!agent.types().includes('error'));
    assert.deepEqual(side.seen.invalidInformational, broken.map((f) => f.type));
  });

  it('a broken storage request (a tarHash that is no SHA-256) is answered error naming the field; socket open, counted', async () => {
    const side = await setup();
    const agent = await FakeAgent.connect(side.url, null);
    cleanups.push(() => agent.close());
    agent.send({ type: 'cache.user.save.complete', messageId: 'm', jobId: 'j', key: 'k', tarHash: 'sha256:abc', sizeBytes: 1 });
    assert.match((await agent.next('error')).message, /^cache\.user\.save\.complete: tarHash: /);
    const requestId = randomUUID();
    agent.send({ type: 'agent.api.request', requestId, method: 'ping' });
    assert.equal((await agent.next('agent.api.response')).requestId, requestId);
    assert.ok(agent.isOpen);
    assert.deepEqual(side.seen.invalidInformational, ['cache.user.save.complete']);
  });

  it('a broken job.status still gets error and close 4003', async () => {
    const side = await setup();
    const agent = await FakeAgent.connect(side.url, null);
    agent.send({ type: 'job.status', messageId: 'm', runId: 'r', jobId: 'j', timestamp: 1 });
    assert.match((await agent.next('error')).message, /job\.status: state/);
    assert.equal((await agent.closed).code, CLOSE_CODES.INVALID_MESSAGE);
    assert.deepEqual(side.seen.invalidInformational, []);
  });
});

describe('the KiCI test agent against a real AgentConnection', () => {
  it('without a token its first frame is agent.register; a job runs to success and every frame is accepted', async () => {
    const side = await setup('none');
    const agent = agentFor(side.url);
    const ack = await agent.start();
    assert.equal(agent.sent[0]?.type, 'agent.register');
    assert.deepEqual(ack.labels, agent.sent[0]?.['labels']);
    assert.deepEqual(agent.sent.slice(1, 3).map((f) => f.type), ['agent.log', 'agent.log'], 'gap marker, then the buffered start line');
    assert.equal(agent.sent[3]?.type, 'config.ack');
    const dispatch = side.dispatch(agent.agentId);
    assert.equal(await agent.jobEnd(dispatch.jobId), 'success');
    await settled(() => side.seen.delivered.length >= 5, 'five job events delivered');
    assert.deepEqual(side.seen.delivered.map((e) => ('state' in e ? `${e.type}:${String(e.state)}` : e.type)), [
      ...['agent.job.ack', 'agent.job.status:running', 'agent.step.status', 'agent.step.status', 'agent.job.status:success'],
    ]);
    assert.ok(side.seen.logs.flat().includes('[workflow-runner] Workflow module loaded'));
    assert.deepEqual([side.seen.invalidInformational, side.seen.unknown, agent.closes], [[], [], []]);
  });

  it('with a token it authenticates first; a bad token ends in auth.failure, 4010 and no reconnect', async () => {
    const side = await setup('token');
    const good = agentFor(side.url, { token: GOOD_TOKEN });
    await good.start();
    assert.deepEqual(good.sent.slice(0, 2).map((f) => f.type), ['auth.request', 'agent.register']);
    const bad = agentFor(side.url, { token: `kat_${'b'.repeat(64)}`, reconnectBaseMs: 1 });
    await assert.rejects(bad.start(), /auth\.failure: Invalid or expired token/);
    assert.equal(bad.state, 'stopped');
    assert.deepEqual(bad.closes.map((c) => c.code), [CLOSE_CODES.AUTH_FAILED]);
  });

  it('a second concurrent dispatch is refused busy, then agent.status; cancel ends the held job', async () => {
    const side = await setup();
    const agent = agentFor(side.url, { script: () => hold() });
    await agent.start();
    const first = side.dispatch(agent.agentId);
    await agent.waitForSent('run.event', (f) => f['eventType'] === 'agent.execution.start');
    const second = side.dispatch(agent.agentId);
    await agent.waitForSent('job.reject', (f) => f['jobId'] === second.jobId && f['reason'] === 'busy');
    const afterReject = agent.sent.slice(agent.sent.findIndex((f) => f.type === 'job.reject'));
    assert.equal(afterReject[1]?.type, 'agent.status');
    assert.equal(afterReject[1]?.['activeJobs'], 1);
    await settled(() => side.seen.delivered.some((e) => e.type === 'agent.job.reject'), 'the reject delivered');
    assert.deepEqual(agent.activeJobs, [first.jobId]);
    const cancel = { type: 'job.cancel', messageId: randomUUID(), runId: first.runId, jobId: first.jobId, reason: 'user', force: false };
    side.send(agent.agentId, cancel);
    assert.equal(await agent.jobEnd(first.jobId), 'cancelled');
    await settled(() => side.seen.delivered.filter((e) => e.type === 'agent.job.status').length === 2, 'the cancelled status delivered');
    assert.deepEqual(side.seen.delivered.filter((e) => e.type === 'agent.job.status').map((e) => ('state' in e ? e.state : '')), ['running', 'cancelled']);
  });

  it('offline: direct frames are dropped, log.chunk is replayed after the gap marker; inFlightJobs names a running job', async () => {
    const side = await setup();
    const agent = agentFor(side.url, { script: () => hold(), reconnectBaseMs: 60_000 });
    await agent.start();
    const first = side.dispatch(agent.agentId);
    await agent.waitForSent('run.event', (f) => f['eventType'] === 'agent.execution.start');
    agent.dropConnection();
    await agent.waitForState('disconnected');
    agent.reconnectNow();
    await agent.waitFor('register.ack', { from: agent.received.length });
    const registers = agent.sent.filter((f) => f.type === 'agent.register');
    assert.deepEqual(registers[1]?.['inFlightJobs'], [{ jobId: first.jobId, runId: first.runId }]);
    await settled(() => side.seen.reclaimed.length > 0, 'the reclaim');
    assert.deepEqual(side.seen.reclaimed, [first.jobId]);

    agent.dropConnection();
    await agent.waitForState('disconnected');
    agent.finish(first.jobId);
    assert.equal(await agent.jobEnd(first.jobId), 'success');
    assert.deepEqual(agent.dropped.filter((f) => f.type === 'job.status').map((f) => f['state']), ['success'], 'the terminal status is lost');
    // The agent reports its status and metrics a moment after a job ends; they are dropped too, and must
    // not land on the new socket, or the replay below is not the replay alone.
    await settled(() => agent.dropped.some((f) => f.type === 'agent.metrics'), 'the post-job status and metrics dropped');
    const sentBefore = agent.sent.length;
    agent.reconnectNow();
    await agent.waitFor('register.ack', { from: agent.received.length });
    await agent.waitForSent('config.ack', (f) => agent.sent.indexOf(f) >= sentBefore);
    const replay = agent.sent.slice(sentBefore);
    assert.deepEqual(replay.map((f) => f.type), ['agent.register', 'agent.log', 'log.chunk', 'log.chunk', 'config.ack']);
    assert.equal(replay[0]?.['inFlightJobs'], undefined, 'the job ended while offline');
    assert.match(String((replay[1]?.['lines'] as string[] | undefined)?.[0]), /^--- Orchestrator offline for \d+s\. Replaying 2 buffered events and 0 buffered log lines\. ---$/);
    assert.deepEqual(replay.slice(2, 4).map((f) => f['stepIndex']), [-1, -1]);
  });
});

describe('AgentConnection: a job that ends while its agent reconnects', () => {
  // Regression: informational frames between auth.success and agent.register closed the new socket 4003, and the held status went with it.
  it('its status and step statuses sent before agent.register are held and applied after the reclaim; its informational frames (run.event, agent.status…) are ignored, the socket stays', async () => {
    const side = await setup('token');
    const agent = agentFor(side.url, { token: GOOD_TOKEN, script: () => hold(), reconnectBaseMs: 60_000, paceMs: 0 });
    await agent.start();
    const job = side.dispatch(agent.agentId);
    await agent.waitForSent('job.status', (f) => f['state'] === 'running');
    agent.dropConnection();
    await agent.waitForState('disconnected');
    agent.whenState('authenticating', () => agent.finish(job.jobId));
    const sentBefore = agent.sent.length;
    agent.reconnectNow();
    await agent.waitFor('register.ack', { from: agent.received.length });
    const beforeRegister = agent.sent.slice(sentBefore, agent.sent.findIndex((f, i) => i >= sentBefore && f.type === 'agent.register'));
    const types = new Set(beforeRegister.map((f) => f.type));
    for (const type of ['job.status', 'step.status', 'run.event']) assert.ok(types.has(type), `${type} went out before agent.register`);
    await settled(() => side.seen.delivered.some((e) => e.type === 'agent.job.status' && 'state' in e && e.state === 'success'), 'the held success delivered');
    assert.deepEqual(agent.closes.map((c) => c.code), [1006], 'only the drop; the new socket stays open');
  });
});

describe('register.ack of an agent a scaler spawned for a job', () => {
  it('carries pendingDispatch: true while its bound job waits; absent for any other agent, never false (SCL-3)', async () => {
    const asked: string[] = [];
    const side = await setup('none', { hasPendingDispatch: (agentId) => (asked.push(agentId), agentId === 'scaler-bare-metal-0a1b2c3d') });
    const spawned = await FakeAgent.connect(side.url, null, { agentId: 'scaler-bare-metal-0a1b2c3d' });
    const other = await FakeAgent.connect(side.url, null, { agentId: 'static-1' });
    cleanups.push(() => spawned.close(), () => other.close());
    const ackOf = (agent: FakeAgent) => agent.received.find((frame) => frame.type === 'register.ack');
    assert.deepEqual(ackOf(spawned), { type: 'register.ack', agentId: 'scaler-bare-metal-0a1b2c3d', labels: [], scalerManaged: false, pendingDispatch: true });
    assert.deepEqual(ackOf(other), { type: 'register.ack', agentId: 'static-1', labels: [], scalerManaged: false });
    assert.deepEqual(asked, ['scaler-bare-metal-0a1b2c3d', 'static-1']);
  });
});
