import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, it } from 'node:test';
import { createDeflateRaw } from 'node:zlib';
import { CLOSE_CODES, PROTOCOL_VERSION } from '../../../src/ws/messages.ts';
import { DATABASE_KINDS, skipReason } from '../../support/database.ts';
import { coordinatorSuite } from '../../support/coordinator-suite.ts';
import { FakeAgent, runStepsWorkflow, type CoordinatorClient } from '../../support/fake-agent.ts';
import { deflateAsAgent, RawWebSocket } from '../../support/raw-websocket.ts';
import { eventually } from '../../support/runtime.ts';

/** Ack deadline 1 s; job lease 2 × 1 s; agent compression accepted (SWITCHYARD_AGENT_COMPRESSION=on). */
const ENV = { SWITCHYARD_DISPATCH_ACK_TIMEOUT_MS: '1000', SWITCHYARD_JOB_HEARTBEAT_INTERVAL_MS: '1000', SWITCHYARD_AGENT_COMPRESSION: 'on' };

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** `switchyard_ws_ownership_violations_total` for one cause. */
const violations = (client: CoordinatorClient, cause: 'other_agent' | 'ended' | 'unknown') => client.metric('switchyard_ws_ownership_violations_total', `{cause="${cause}"}`);

for (const kind of DATABASE_KINDS) {
  describe(`agent protocol conformance with a scripted agent (${kind} Postgres)`, { skip: await skipReason(kind) }, () => {
    const suite = coordinatorSuite(kind, { env: ENV });
    const { connect } = suite;

    async function dispatched(label: string) {
      const agent = await connect({ labels: [label] });
      const runId = await suite.client.createRun(runStepsWorkflow(`wf-${label}`, label, [{ name: 'build', steps: [['step', 'true']] }]));
      return { agent, runId, dispatch: await agent.dispatch(0) };
    }

    it('permessage-deflate as the stock agent uses it: messages pointing back into earlier ones are read; frames under 16 KiB go back uncompressed', async () => {
      const socket = await RawWebSocket.open(suite.client.wsUrl);
      try {
        assert.match(socket.extensions, /permessage-deflate/, 'the agent offer is accepted');
        const deflate = createDeflateRaw({ windowBits: 15 });
        socket.sendFrame(await deflateAsAgent(deflate, JSON.stringify({ type: 'auth.request', token: suite.token, protocolVersion: PROTOCOL_VERSION })), { compressed: true });
        const agentId = `raw-${randomUUID().slice(0, 8)}`;
        const register = { type: 'agent.register', messageId: randomUUID(), agentId, labels: ['raw'], maxConcurrency: 1, properties: {}, inFlightJobs: [] };
        // Deflated on the same stream: it inflates only with the window the first message left.
        socket.sendFrame(await deflateAsAgent(deflate, JSON.stringify(register)), { compressed: true });
        deflate.close();
        const [authSuccess, registerAck] = [await socket.frame(0), await socket.frame(1)];
        assert.ok(authSuccess && registerAck);
        assert.deepEqual([authSuccess.compressed, registerAck.compressed], [false, false], 'frames under 16 KiB are sent as they are');
        assert.equal(RawWebSocket.json(authSuccess).type, 'auth.success');
        assert.deepEqual(RawWebSocket.json(registerAck), { type: 'register.ack', agentId, labels: ['raw'], scalerManaged: false });
      } finally {
        socket.close();
      }
    });

    it('register.ack echoes the labels sent, with scalerManaged false for a static token', async () => {
      const labels = ['linux', 'gpu', 'kici:os:linux', 'kici:arch:x64'];
      const agent = await connect({ labels });
      const ack = await agent.next('register.ack');
      assert.deepEqual(ack.labels, labels);
      assert.equal(ack.agentId, agent.agentId);
      assert.equal(ack.scalerManaged, false);
    });

    it('G3: an agentId held by another token closes 4003; the same token takes it over and the old socket goes', async () => {
      const agentId = `g3-${randomUUID().slice(0, 8)}`;
      const holder = await connect({ agentId });
      const other = await suite.client.createToken();
      const thief = await FakeAgent.open(suite.client.wsUrl, { agentId });
      suite.afterTest(() => thief.close());
      await thief.authenticate(other.token);
      thief.send(thief.registerMessage());
      const refused = await thief.closed;
      assert.equal(refused.code, CLOSE_CODES.INVALID_MESSAGE);
      assert.match(refused.reason, /held by another token/);
      assert.ok(!thief.types().includes('auth.failure'), 'not a credential failure: the agent may retry');
      assert.ok(holder.isOpen);

      const successor = await connect({ agentId });
      assert.ok(successor.isOpen);
      const replaced = await holder.closed;
      assert.equal(replaced.code, CLOSE_CODES.INVALID_MESSAGE);
    });

    it('a second agent.register on a live socket runs the gates again: escalating labels closes 4010', async () => {
      const scoped = await suite.client.createToken({ labels: ['re-a'] });
      const agent = await connect({ labels: ['re-a'] }, scoped.token);
      agent.send(agent.registerMessage({ labels: ['re-a', 're-b'] }));
      assert.match((await agent.next('auth.failure')).reason, /re-b/);
      assert.equal((await agent.closed).code, CLOSE_CODES.AUTH_FAILED);
    });

    it('job.status running without job.ack settles the dispatch: the ack deadline passes without a cancel', async () => {
      const label = `run-${randomUUID().slice(0, 8)}`;
      const { agent, runId, dispatch } = await dispatched(label);
      agent.status(dispatch, 'running');
      await sleep(1_500);
      assert.ok(agent.isOpen);
      assert.equal(agent.types().filter((t) => t === 'job.cancel').length, 0);
      assert.equal((await suite.client.job(runId, 'build')).status, 'running');
      agent.status(dispatch, 'success');
      await suite.client.waitForRunStatus(runId, 'success', 5_000);
    });

    it('a running job without job.heartbeat for the lease becomes timed_out_stale and gets job.cancel {force, "stale"}', async () => {
      const label = `stale-${randomUUID().slice(0, 8)}`;
      const { agent, runId, dispatch } = await dispatched(label);
      agent.ack(dispatch);
      agent.status(dispatch, 'running');
      const cancel = await agent.next('job.cancel', (m) => m.jobId === dispatch.jobId, 6_000);
      assert.equal(cancel.force, true);
      assert.equal(cancel.reason, 'stale');
      const job = await suite.client.waitForJob(runId, 'build', (j) => j.status === 'timed_out_stale', 5_000, 'stale');
      assert.equal(job.outcome, 'no heartbeat within the job lease');
    });

    it('job.heartbeat keeps renewing the lease', async () => {
      const label = `beat-${randomUUID().slice(0, 8)}`;
      const { agent, runId, dispatch } = await dispatched(label);
      agent.ack(dispatch);
      agent.status(dispatch, 'running');
      for (let i = 0; i < 8; i++) {
        await sleep(400);
        agent.send({ type: 'job.heartbeat', runId: dispatch.runId, jobId: dispatch.jobId, timestamp: Date.now() });
      }
      assert.equal((await suite.client.job(runId, 'build')).status, 'running', 'alive after 3.2 s with a 2 s lease');
      agent.status(dispatch, 'success');
      await suite.client.waitForRunStatus(runId, 'success', 5_000);
    });

    it('a log.chunk from the owner arriving after the job ended (within 30 s) is still stored', async () => {
      const label = `late-${randomUUID().slice(0, 8)}`;
      const { agent, runId, dispatch } = await dispatched(label);
      agent.runAtOnce(dispatch);
      await suite.client.waitForRunStatus(runId, 'success', 5_000);
      const before = await Promise.all([violations(suite.client, 'other_agent'), violations(suite.client, 'ended'), violations(suite.client, 'unknown')]);
      agent.log(dispatch, 0, ['late but welcome']);
      // Log writes do not hold up the socket: the line is stored shortly after, not before the next frame.
      const stored = async () => (await suite.client.logs(runId)).flatMap((c) => c.lines);
      const lines = await eventually(async () => ((await stored()).length > 0 ? stored() : null), 5_000, 'the late line');
      assert.deepEqual(lines, ['late but welcome']);
      assert.deepEqual(await Promise.all([violations(suite.client, 'other_agent'), violations(suite.client, 'ended'), violations(suite.client, 'unknown')]), before, 'not a violation of any kind');
    });

    it('an agent that misses its ack deadline but is alive keeps its socket: job.cancel {force}, the job is requeued and runs again on it', async () => {
      const label = `slow-${randomUUID().slice(0, 8)}`;
      const { agent, runId, dispatch } = await dispatched(label);
      const alive = setInterval(() => agent.send({ type: 'agent.status', messageId: randomUUID(), agentId: agent.agentId, activeJobs: 1 }), 200);
      try {
        const cancel = await agent.next('job.cancel', (m) => m.jobId === dispatch.jobId, 6_000);
        assert.equal(cancel.force, true);
        assert.equal(cancel.reason, 'dispatch ack timeout');
        const second = await agent.next('job.dispatch', (m) => m.jobId !== dispatch.jobId, 6_000);
        assert.ok(agent.isOpen, 'not closed 4031: it was sending frames all along');
        agent.runAtOnce(second);
      } finally {
        clearInterval(alive);
      }
      const done = await suite.client.waitForRunStatus(runId, 'success', 10_000);
      assert.equal(done.jobs[0]?.attempt, 2);
      assert.ok(agent.isOpen);
    });

    it('an honest replay: job frames for attempts the coordinator does not know are dropped quietly and never close the socket', async () => {
      const agent = await connect({ labels: [`replay-${randomUUID().slice(0, 8)}`] });
      const before = { unknown: await violations(suite.client, 'unknown'), other: await violations(suite.client, 'other_agent') };
      for (let i = 0; i < 10; i++) agent.status({ runId: randomUUID(), jobId: randomUUID() }, 'success');
      const requestId = randomUUID();
      agent.send({ type: 'agent.api.request', requestId, method: 'ping' });
      await agent.next('agent.api.response', (m) => m.requestId === requestId);
      assert.ok(agent.isOpen, 'ten of them, where five from another agent would close 4003');
      assert.equal(await violations(suite.client, 'unknown'), before.unknown + 10);
      assert.equal(await violations(suite.client, 'other_agent'), before.other);
    });
  });
}
