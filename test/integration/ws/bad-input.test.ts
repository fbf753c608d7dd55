import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, afterEach, before, describe, it } from 'node:test';
import { CLOSE_CODES } from '../../../src/ws/messages.ts';
import { DATABASE_KINDS, skipReason } from '../../support/database.ts';
import { CoordinatorClient, dropDatabase, FakeAgent, runStepsWorkflow, type FakeAgentOptions } from '../../support/fake-agent.ts';
import { ADMIN_TOKEN, after as processCleanups, sharedDatabaseUrl, startCoordinatorProcess, stopProcess } from '../../support/processes.ts';
import type { CoordinatorProcess } from '../../support/processes.ts';
import { RawWebSocket } from '../../support/raw-websocket.ts';

const MiB = 1024 * 1024;


/** A `log.chunk` frame of at least `bytes` bytes (its size, not its content, is under test). */
function bigFrame(bytes: number): string {
  const base = { type: 'log.chunk', messageId: randomUUID(), runId: 'r', jobId: 'j', stepIndex: 0, timestamp: Date.now() };
  return JSON.stringify({ ...base, lines: ['x'.repeat(bytes)] });
}

/** An informational `agent.log` frame of at least `bytes` bytes. */
function bigAgentLog(bytes: number): string {
  return JSON.stringify({ type: 'agent.log', agentId: 'a', lines: ['x'.repeat(bytes)] });
}

for (const kind of DATABASE_KINDS) {
  describe(`agent socket: bad input is answered with the right close code (${kind} Postgres)`, { skip: await skipReason(kind) }, () => {
    let databaseUrl: string;
    let coordinator: CoordinatorProcess;
    let client: CoordinatorClient;
    let token: string;
    const agents: FakeAgent[] = [];

    before(async () => {
      databaseUrl = await sharedDatabaseUrl(kind);
      coordinator = await startCoordinatorProcess({ DATABASE_URL: databaseUrl, SWITCHYARD_AGENT_COMPRESSION: 'on' });
      client = new CoordinatorClient(coordinator.url, ADMIN_TOKEN);
      token = (await client.createToken()).token;
    });
    afterEach(async () => {
      for (const agent of agents.splice(0)) await agent.close();
      assert.equal(coordinator.child.exitCode, null, 'the coordinator process is still running');
      assert.ok(await client.healthy(), 'and answers /healthz');
    });
    after(async () => {
      await stopProcess(coordinator);
      if (kind === 'external') await dropDatabase(databaseUrl);
      for (const fn of processCleanups.splice(0)) await fn();
    });

    async function open(options: FakeAgentOptions = {}): Promise<FakeAgent> {
      const agent = await FakeAgent.open(client.wsUrl, options);
      agents.push(agent);
      return agent;
    }

    async function registered(options: FakeAgentOptions = {}, withToken = token): Promise<FakeAgent> {
      const agent = await open(options);
      await agent.authenticate(withToken);
      await agent.register();
      return agent;
    }

    it('a non-JSON frame: error {invalid_message}, then close 4003', async () => {
      const agent = await registered();
      agent.sendRaw('{"type": "heartbeat", oops');
      const error = await agent.next('error');
      assert.equal(error.code, 'invalid_message');
      assert.match(error.message, /invalid JSON/);
      assert.equal((await agent.closed).code, CLOSE_CODES.INVALID_MESSAGE);
    });

    it('a frame that fails its schema: error naming the field, then close 4003', async () => {
      const agent = await registered();
      agent.send({ type: 'job.ack', runId: 'r', jobId: 'j', timestamp: Date.now() });
      const error = await agent.next('error');
      assert.match(error.message, /job\.ack: messageId/);
      assert.equal((await agent.closed).code, CLOSE_CODES.INVALID_MESSAGE);
    });

    it('a single message over 4 MiB closes 4003 at once', async () => {
      const agent = await registered({ compress: false });
      agent.sendRaw(bigFrame(4 * MiB + 1024));
      assert.equal((await agent.closed).code, CLOSE_CODES.INVALID_MESSAGE);
    });

    it('a 3 MiB informational message is over the byte burst but not the single-message cap: dropped with rate.limit.warning, socket open', async () => {
      const agent = await registered({ compress: false });
      agent.sendRaw(bigAgentLog(3 * MiB));
      const warning = await agent.next('rate.limit.warning');
      assert.ok(warning.retryAfterMs > 0);
      assert.ok(agent.isOpen);
    });

    it('a 3 MiB log.chunk over the byte burst is never dropped: it is taken, and the socket is read again once the debt is paid', async () => {
      const agent = await registered({ compress: false });
      const unknown = '{cause="unknown"}';
      const before = await client.metric('switchyard_ws_ownership_violations_total', unknown);
      agent.sendRaw(bigFrame(3 * MiB));
      const requestId = randomUUID();
      agent.send({ type: 'agent.api.request', requestId, method: 'ping' });
      await agent.next('agent.api.response', (m) => m.requestId === requestId, 15_000);
      assert.equal(await client.metric('switchyard_ws_ownership_violations_total', unknown), before + 1, 'the chunk reached the ownership check (its attempt is unknown)');
      assert.ok(!agent.types().includes('rate.limit.warning'));
      assert.ok(agent.isOpen);
    });

    it('a frame over the 25 MiB cap is refused by the WebSocket layer with 1009, compressed or not', async () => {
      for (const compress of [false, true]) {
        const agent = await registered({ compress });
        agent.sendRaw(bigFrame(26 * MiB));
        assert.equal((await agent.closed).code, 1009, `permessage-deflate ${compress ? 'on' : 'off'}`);
      }
    });

    it('compressed bytes that do not inflate close the socket with 1007', async () => {
      const socket = await RawWebSocket.open(client.wsUrl);
      try {
        assert.match(socket.extensions, /permessage-deflate/);
        socket.sendFrame(Buffer.from([0xff, 0xff, 0xff, 0x13, 0x37]), { compressed: true });
        assert.equal(await socket.closeCode(), 1007);
      } finally {
        socket.close();
      }
    });

    it('a binary frame closes 4003', async () => {
      const agent = await registered();
      agent.sendRaw(Buffer.from(JSON.stringify({ type: 'heartbeat', timestamp: Date.now() })), true);
      const closed = await agent.closed;
      assert.equal(closed.code, CLOSE_CODES.INVALID_MESSAGE);
      assert.match(closed.reason, /Binary/);
    });

    it('agent.register before auth.request in token mode: auth.failure, close 4010', async () => {
      const agent = await open();
      agent.send(agent.registerMessage());
      const failure = await agent.next('auth.failure');
      assert.match(failure.reason, /Expected auth\.request/);
      assert.equal((await agent.closed).code, CLOSE_CODES.AUTH_FAILED);
      assert.ok(!agent.types().includes('register.ack'));
    });

    it('an unknown token: auth.failure "Invalid or expired token", close 4010', async () => {
      const agent = await open();
      agent.send({ type: 'auth.request', token: `kat_${'f'.repeat(64)}`, protocolVersion: 1 });
      assert.equal((await agent.next('auth.failure')).reason, 'Invalid or expired token');
      assert.equal((await agent.closed).code, CLOSE_CODES.AUTH_FAILED);
    });

    it('protocolVersion 0: auth.failure, close 4005', async () => {
      const agent = await open();
      agent.send({ type: 'auth.request', token, protocolVersion: 0 });
      await agent.next('auth.failure');
      assert.equal((await agent.closed).code, CLOSE_CODES.PROTOCOL_ERROR);
    });

    it('revoking a token kicks its live socket with auth.failure "Token revoked" and 4010; the token is refused afterwards', async () => {
      const minted = await client.createToken();
      const agent = await registered({}, minted.token);
      await client.revokeToken(minted.id);
      assert.equal((await agent.next('auth.failure')).reason, 'Token revoked');
      assert.equal((await agent.closed).code, CLOSE_CODES.AUTH_FAILED);
      const again = await open();
      again.send({ type: 'auth.request', token: minted.token, protocolVersion: 1 });
      assert.equal((await again.next('auth.failure')).reason, 'Invalid or expired token');
      assert.equal((await again.closed).code, CLOSE_CODES.AUTH_FAILED);
    });

    it('label escalation: a token scoped to [a] registering [a, b] gets 4010 with a reason naming b', async () => {
      const scoped = await client.createToken({ labels: ['scope-a'] });
      const agent = await open({ labels: ['scope-a', 'scope-b', 'kici:os:linux'] });
      await agent.authenticate(scoped.token);
      agent.send(agent.registerMessage());
      const failure = await agent.next('auth.failure');
      assert.equal(failure.reason, 'Agent labels exceed token-bound scope: scope-b');
      const closed = await agent.closed;
      assert.equal(closed.code, CLOSE_CODES.AUTH_FAILED);
      assert.match(closed.reason, /scope-b/);
      assert.ok(!agent.types().includes('register.ack'));
      const within = await registered({ labels: ['scope-a', 'kici:os:linux'] }, scoped.token);
      assert.ok(within.isOpen, 'self-reported kici:os:* labels are outside the scope rule');
    });

    it('an unknown message type is ignored and counted; the socket stays open and keeps working', async () => {
      const agent = await registered();
      const type = `x.custom.${randomUUID().slice(0, 8)}`;
      agent.send({ type, payload: 1 });
      agent.send({ type, payload: 2 });
      const requestId = randomUUID();
      agent.send({ type: 'agent.api.request', requestId, method: 'ping' });
      const answer = await agent.next('agent.api.response');
      assert.equal(answer.requestId, requestId, 'frames after the unknown ones are still served');
      assert.ok(agent.isOpen);
      assert.equal(await client.metric('switchyard_ws_unknown_messages_total', `{type="${type}"}`), 2);
    });

    it('job messages from an agent that does not own the attempt are dropped; the fifth within 60 s closes 4003', async () => {
      const label = `own-${randomUUID().slice(0, 8)}`;
      const owner = await registered({ labels: [label] });
      const intruder = await registered({ labels: ['elsewhere'] });
      const runId = await client.createRun(runStepsWorkflow(`wf-${label}`, label, [{ name: 'build', steps: [['step', 'true']] }]));
      const dispatch = await owner.dispatch(0);
      owner.ack(dispatch);
      owner.status(dispatch, 'running');
      await client.waitForJob(runId, 'build', (j) => j.status === 'running', 5_000, 'running');
      const otherAgent = '{cause="other_agent"}';
      const before = await client.metric('switchyard_ws_ownership_violations_total', otherAgent);

      for (let i = 0; i < 3; i++) intruder.status(dispatch, 'success');
      intruder.log(dispatch, 0, ['not mine']);
      const requestId = randomUUID();
      intruder.send({ type: 'agent.api.request', requestId, method: 'ping' });
      await intruder.next('agent.api.response', (m) => m.requestId === requestId);
      assert.ok(intruder.isOpen, 'four violations are dropped without a close');
      intruder.status(dispatch, 'failed');
      assert.equal((await intruder.closed).code, CLOSE_CODES.INVALID_MESSAGE);
      assert.equal(await client.metric('switchyard_ws_ownership_violations_total', otherAgent), before + 5);
      const job = await client.job(runId, 'build');
      assert.equal(job.status, 'running', 'the intruder changed nothing');
      assert.deepEqual(await client.logs(runId), [], 'and stored no log line');

      owner.status(dispatch, 'success');
      await client.waitForRunStatus(runId, 'success', 10_000);
      assert.ok(owner.isOpen);
    });
  });
}
