import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, afterEach, before, describe, it } from 'node:test';
import type { AgentView } from '../../../src/http/api-agents.ts';
import { CLOSE_CODES } from '../../../src/ws/messages/common.ts';
import { skipReason } from '../../support/database.ts';
import { CoordinatorClient, dropDatabase, FakeAgent, runStepsWorkflow, type JobDispatchFrame } from '../../support/fake-agent.ts';
import { ADMIN_TOKEN, after as processCleanups, sharedDatabaseUrl, startCoordinatorProcess, stopProcess } from '../../support/processes.ts';
import type { CoordinatorProcess } from '../../support/processes.ts';
import { eventually } from '../../support/runtime.ts';

describe('GET and DELETE /api/v1/agents, with a peer on the same database', { skip: await skipReason('external') }, () => {
  let databaseUrl: string;
  let here: CoordinatorProcess;
  let peer: CoordinatorProcess;
  let client: CoordinatorClient;
  let peerClient: CoordinatorClient;
  let token: string;
  const agents: FakeAgent[] = [];

  before(async () => {
    databaseUrl = await sharedDatabaseUrl('external');
    here = await startCoordinatorProcess({ DATABASE_URL: databaseUrl, SWITCHYARD_COORDINATOR_ID: 'coord-here' });
    peer = await startCoordinatorProcess({ DATABASE_URL: databaseUrl, SWITCHYARD_COORDINATOR_ID: 'coord-peer' });
    client = new CoordinatorClient(here.url, ADMIN_TOKEN);
    peerClient = new CoordinatorClient(peer.url, ADMIN_TOKEN);
    token = (await client.createToken()).token;
  });
  afterEach(async () => {
    for (const agent of agents.splice(0)) await agent.close();
  });
  after(async () => {
    await stopProcess(here);
    await stopProcess(peer);
    await dropDatabase(databaseUrl);
    for (const fn of processCleanups.splice(0)) await fn();
  });

  async function connect(on: CoordinatorClient, agentId: string, labels: string[], maxConcurrency = 1): Promise<FakeAgent> {
    const agent = await FakeAgent.connect(on.wsUrl, token, { agentId, labels, maxConcurrency });
    agents.push(agent);
    return agent;
  }

  const listed = async (on: CoordinatorClient) => (await on.json<{ agents: AgentView[] }>('/api/v1/agents')).agents;

  it('lists the agents of this coordinator and of its peer, with labels, slots and where each is connected', async () => {
    await connect(client, 'agent-a', ['linux', 'gpu'], 2);
    await connect(peerClient, 'agent-b', ['mac']);
    const agentsSeen = await eventually(async () => {
      const all = await listed(client);
      return all.length === 2 && all.every((a) => a.connectedAt !== null) ? all : null;
    }, 10_000, 'both agents listed with their sessions');
    assert.deepEqual(
      agentsSeen.map((a) => [a.agentId, a.labels, a.slotsUsed, a.maxConcurrency, a.coordinatorId]),
      [
        ['agent-a', ['linux', 'gpu'], 0, 2, 'coord-here'],
        ['agent-b', ['mac'], 0, 1, 'coord-peer'],
      ],
    );
    for (const agent of agentsSeen) assert.ok(typeof agent.connectedAt === 'number' && agent.connectedAt <= Date.now());
  });

  it('a peer\'s agent running a job of a run owned here counts that slot as used', async () => {
    const label = `slot-${randomUUID().slice(0, 8)}`;
    const onDispatch = (dispatch: JobDispatchFrame, agent: FakeAgent) => {
      agent.ack(dispatch);
      agent.status(dispatch, 'running');
    };
    agents.push(await FakeAgent.connect(peerClient.wsUrl, token, { agentId: 'agent-busy', labels: [label], maxConcurrency: 2, onDispatch }));
    const runId = await client.createRun(runStepsWorkflow('holds', label, [{ name: 'hold', steps: [['wait', 'sleep 100']] }]));
    await client.waitForJob(runId, 'hold', (job) => job.status === 'running', 20_000, 'running on the peer agent');
    const busy = await eventually(async () => (await listed(client)).find((a) => a.agentId === 'agent-busy' && a.slotsUsed === 1), 10_000, 'one slot used');
    assert.deepEqual([busy.coordinatorId, busy.maxConcurrency], ['coord-peer', 2]);
    const onPeer = (await listed(peerClient)).find((a) => a.agentId === 'agent-busy');
    assert.deepEqual([onPeer?.slotsUsed, onPeer?.unusable], [1, null], 'the peer counts its own slot');
    await client.cancel(runId, { force: true });
  });

  it('DELETE closes the socket of an agent connected here; it is then no longer listed', async () => {
    const agent = await connect(client, 'agent-kick', ['linux']);
    const answer = await client.json<{ agentId: string; disconnected: boolean }>('/api/v1/agents/agent-kick', { method: 'DELETE' });
    assert.deepEqual(answer, { agentId: 'agent-kick', disconnected: true, coordinatorId: 'coord-here' });
    const closed = await agent.closed;
    assert.deepEqual(closed, { code: CLOSE_CODES.NORMAL, reason: 'disconnected by an administrator' });
    await eventually(async () => !(await listed(client)).some((a) => a.agentId === 'agent-kick'), 10_000, 'the agent to leave the list');
  });

  it('DELETE of an unknown agent is 404; of a peer\'s agent 409 naming the peer', async () => {
    const unknown = await fetch(`${here.url}/api/v1/agents/nobody`, { method: 'DELETE', headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
    assert.equal(unknown.status, 404);
    assert.deepEqual(await unknown.json(), { error: 'not found', reason: 'no connected agent nobody' });
    await connect(peerClient, 'agent-far', ['mac']);
    await eventually(async () => (await listed(client)).some((a) => a.agentId === 'agent-far'), 10_000, 'the peer agent to be listed');
    const elsewhere = await fetch(`${here.url}/api/v1/agents/agent-far`, { method: 'DELETE', headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
    assert.equal(elsewhere.status, 409);
    const body = (await elsewhere.json()) as { error: string; reason: string };
    assert.equal(body.error, 'connected elsewhere');
    assert.match(body.reason, /agent agent-far is connected to coordinator coord-peer; send the request to that coordinator/);
  });

  it('without the admin token the routes answer 401', async () => {
    assert.equal((await fetch(`${here.url}/api/v1/agents`)).status, 401);
    assert.equal((await fetch(`${here.url}/api/v1/agents/x`, { method: 'DELETE', headers: { authorization: 'Bearer wrong' } })).status, 401);
  });
});
