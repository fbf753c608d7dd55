import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { CLOSE_CODES } from '../../../src/ws/messages.ts';
import { skipReason } from '../../support/database.ts';
import { CoordinatorClient, dropDatabase, FakeAgent } from '../../support/fake-agent.ts';
import { ADMIN_TOKEN, sharedDatabaseUrl, startCoordinatorProcess, stopProcess } from '../../support/processes.ts';
import type { CoordinatorProcess } from '../../support/processes.ts';

/**
 * The handshake timers are real seconds (5 s auth, 10 s register, protocol.md §4); the cases run
 * concurrently on one coordinator. They never touch the database, so one kind is enough.
 */
describe('agent socket: handshake timeouts (external Postgres)', { skip: await skipReason('external'), concurrency: true }, () => {
  let databaseUrl: string;
  let coordinator: CoordinatorProcess;
  let client: CoordinatorClient;
  let token: string;

  before(async () => {
    databaseUrl = await sharedDatabaseUrl('external');
    coordinator = await startCoordinatorProcess({ DATABASE_URL: databaseUrl });
    client = new CoordinatorClient(coordinator.url, ADMIN_TOKEN);
    token = (await client.createToken()).token;
  });
  after(async () => {
    assert.equal(coordinator.child.exitCode, null, 'the coordinator process is still running');
    assert.ok(await client.healthy(), 'and answers /healthz');
    await stopProcess(coordinator);
    await dropDatabase(databaseUrl);
  });

  it('no auth.request within 5 s: close 4002 "Auth timeout"', async () => {
    const agent = await FakeAgent.open(client.wsUrl);
    const opened = Date.now();
    const closed = await agent.closed;
    const elapsed = Date.now() - opened;
    assert.equal(closed.code, CLOSE_CODES.AUTH_OR_REGISTER_TIMEOUT);
    assert.equal(closed.reason, 'Auth timeout');
    assert.ok(elapsed >= 4_800 && elapsed < 7_000, `closed after ${elapsed} ms`);
    assert.deepEqual(agent.types(), [], 'no auth.failure: a timeout is not a credential failure');
  });

  it('no agent.register within 10 s of auth.success: close 4002 "Register timeout"', async () => {
    const agent = await FakeAgent.open(client.wsUrl);
    await agent.authenticate(token);
    const authenticated = Date.now();
    const closed = await agent.closed;
    const elapsed = Date.now() - authenticated;
    assert.equal(closed.code, CLOSE_CODES.AUTH_OR_REGISTER_TIMEOUT);
    assert.equal(closed.reason, 'Register timeout');
    assert.ok(elapsed >= 9_800 && elapsed < 12_000, `closed after ${elapsed} ms`);
  });

  it('any other first frame after auth.success closes 4003 at once, not 4002 later', async () => {
    const agent = await FakeAgent.open(client.wsUrl);
    await agent.authenticate(token);
    agent.send({ type: 'heartbeat', timestamp: Date.now() });
    const closed = await agent.closed;
    assert.equal(closed.code, CLOSE_CODES.INVALID_MESSAGE);
    assert.equal(closed.reason, 'Expected agent.register');
  });

  it('a registered agent outlives both timers', async () => {
    const agent = await FakeAgent.connect(client.wsUrl, token);
    await new Promise((resolve) => setTimeout(resolve, 11_000));
    assert.ok(agent.isOpen);
    await agent.close();
  });
});
