import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import pg from 'pg';
import { pino } from 'pino';
import { RunNotStorableError } from '../../../actors/runs/errors.ts';
import { loadConfig } from '../../../src/config/index.ts';
import { startCoordinator, type Coordinator } from '../../../src/main.ts';
import type { LockWorkflow } from '../../../machines/lock.types.ts';
import { skipReason, tempDir } from '../../support/database.ts';
import { CoordinatorClient, dropDatabase, FakeAgent, runStepsWorkflow } from '../../support/fake-agent.ts';
import { sharedDatabaseUrl } from '../../support/processes.ts';
import { eventually, planFor } from '../../support/runtime.ts';

// A run's first placement is answered in the entry that created it (docs/architecture.md#placement-in-the-same-entry):
// one transaction before the dispatch instead of two, and nothing leaves the process before it commits; a job no
// agent can take shows why from that same transaction, with no entry of its own.

const LABEL = 'inline';

describe('placement in the same entry (external Postgres)', { skip: await skipReason('external') }, () => {
  let databaseUrl: string;
  let coordinator: Coordinator;
  let client: CoordinatorClient;
  let token: string;
  const agents: FakeAgent[] = [];
  let pgClient: pg.Client;
  const query = async <T extends pg.QueryResultRow>(text: string, ...values: unknown[]): Promise<T[]> => (await pgClient.query<T>(text, values)).rows;

  before(async () => {
    databaseUrl = await sharedDatabaseUrl('external');
    const adminToken = `sya_test_${randomBytes(8).toString('hex')}`;
    const config = loadConfig({ DATABASE_URL: databaseUrl, PORT: '0', SWITCHYARD_DATA_DIR: await tempDir(), SWITCHYARD_ADMIN_TOKEN: adminToken, LOG_LEVEL: 'silent' });
    coordinator = await startCoordinator(config, pino({ level: 'silent' }));
    client = new CoordinatorClient(coordinator.url, adminToken);
    token = (await client.createToken()).token;
    pgClient = new pg.Client({ connectionString: databaseUrl });
    await pgClient.connect();
  });
  after(async () => {
    for (const agent of agents) await agent.close();
    await coordinator.close();
    await pgClient.end();
    await dropDatabase(databaseUrl);
  });

  const journalOf = (runId: string) =>
    query<{ seq: number; type: string; tx: string }>(`SELECT seq, event->>'type' AS type, xmin::text AS tx FROM run_events WHERE run_id = $1 ORDER BY seq`, runId);
  const placementRequests = (runId: string) => query<{ n: string }>(`SELECT count(*) AS n FROM outbox WHERE run_id = $1 AND kind = 'requestPlacement'`, runId);

  it('a free agent: run.created and placement.granted are journaled in one transaction, then the dispatch is sent', async () => {
    const agent = await FakeAgent.connect(client.wsUrl, token, { agentId: `inline-${randomUUID().slice(0, 8)}`, labels: [LABEL], maxConcurrency: 1 });
    agents.push(agent);
    const runId = await client.createRun(runStepsWorkflow('inline-free', LABEL, [{ name: 'build', steps: [['s', 'true']] }]));
    const dispatch = await agent.dispatch(0);
    assert.equal(dispatch.runId, runId);
    const journal = await journalOf(runId);
    assert.deepEqual(journal.slice(0, 2).map((e) => [e.seq, e.type]), [[0, 'run.created'], [1, 'placement.granted']]);
    assert.equal(journal[0]?.tx, journal[1]?.tx, 'both events are written by the same transaction');
    assert.equal(Number((await placementRequests(runId))[0]?.n), 0, 'no placement request was left for the dispatcher');
    agent.runAtOnce(dispatch);
    await client.waitForJob(runId, 'build', (j) => j.status === 'success');
  });

  it('a busy agent: the job is told why it waits in the creating transaction, queues, and is granted in a later one when the slot frees', async () => {
    const agent = await FakeAgent.connect(client.wsUrl, token, { agentId: `busy-${randomUUID().slice(0, 8)}`, labels: [`${LABEL}-busy`], maxConcurrency: 1 });
    agents.push(agent);
    const workflow = runStepsWorkflow('inline-busy', `${LABEL}-busy`, [{ name: 'build', steps: [['s', 'true']] }]);
    const first = await client.createRun(workflow);
    const firstDispatch = await agent.dispatch(0);
    const second = await client.createRun(workflow);
    await client.waitForJob(second, 'build', (j) => j.status === 'pending' && j.waiting_reason !== null);
    assert.equal(coordinator.runtime.dispatcher.isWaiting(second, 'build'), true, 'the queued job asked the dispatcher');
    assert.equal(Number((await placementRequests(second))[0]?.n), 0, 'the ask lives in memory only: no outbox row, no done mark (a restore asks again)');
    agent.runAtOnce(firstDispatch);
    const secondDispatch = await agent.dispatch(1);
    assert.equal(secondDispatch.runId, second);
    const journal = await journalOf(second);
    assert.deepEqual(journal.slice(0, 2).map((e) => [e.seq, e.type]), [[0, 'run.created'], [1, 'placement.none']]);
    assert.equal(journal[0]?.tx, journal[1]?.tx, 'the reason is journaled by the transaction that created the run');
    assert.equal(journal.filter((e) => e.type === 'placement.none').length, 1, 'the queue did not tell the same reason again');
    const granted = journal.find((e) => e.type === 'placement.granted');
    assert.notEqual(granted?.tx, journal[0]?.tx, 'granted after the slot freed, not with the creation');
    agent.runAtOnce(secondDispatch);
    await client.waitForJob(first, 'build', (j) => j.status === 'success');
    await client.waitForJob(second, 'build', (j) => j.status === 'success');
  });

  it('an entry that is never stored gives the slot it reserved back, and the next run gets the agent', async () => {
    await query(`CREATE OR REPLACE FUNCTION refuse_poison() RETURNS trigger LANGUAGE plpgsql AS $f$
      BEGIN IF NEW.run_id LIKE 'poison-%' THEN RAISE EXCEPTION 'poisoned' USING ERRCODE = '22023'; END IF; RETURN NEW; END $f$`);
    await query(`CREATE TRIGGER refuse_poison BEFORE INSERT ON run_events FOR EACH ROW EXECUTE FUNCTION refuse_poison()`);
    const label = `${LABEL}-poison`;
    const agentId = `poison-agent-${randomUUID().slice(0, 8)}`;
    const agent = await FakeAgent.connect(client.wsUrl, token, { agentId, labels: [label], maxConcurrency: 1 });
    agents.push(agent);
    const workflow = runStepsWorkflow('inline-poison', label, [{ name: 'build', steps: [['s', 'true']] }]) as LockWorkflow;
    const runId = `poison-${randomUUID()}`;
    await assert.rejects(coordinator.runtime.supervisor.createRun({ input: planFor(runId, workflow), repository: null }), RunNotStorableError);
    await eventually(() => coordinator.runtime.registry.get(agentId)?.slots.size === 0, 5_000, 'the reserved slot to be given back');
    const next = await client.createRun(workflow);
    const dispatch = await agent.dispatch(0);
    assert.equal(dispatch.runId, next, 'no dispatch was ever sent for the run that was not stored');
    agent.runAtOnce(dispatch);
    await client.waitForJob(next, 'build', (j) => j.status === 'success');
  });
});
