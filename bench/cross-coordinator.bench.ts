/**
 * Cross-coordinator latency: two coordinator processes on one database; runs are created on A and
 * their one job runs on an agent connected to B (any agent serves any run), or, for comparison, on an
 * agent connected to A. Figures: create run → job.dispatch at the agent, and job.status sent → the
 * owner journals it (both one-way, same machine clock). Postgres LISTEN/NOTIFY carries the wake-ups.
 * Then throughput: a backlog of one-job runs, all created on A at once, drained by agents that answer
 * every dispatch at once (ack, running, success), either all connected to B or all connected to A.
 *
 *   node --no-node-snapshot --import tsx bench/cross-coordinator.bench.ts [--quick]
 */
import { randomUUID } from 'node:crypto';
import { CoordinatorClient, FakeAgent, runStepsWorkflow, type JobDispatchFrame } from '../test/support/fake-agent.ts';
import { ADMIN_TOKEN, startCoordinatorProcess, stopProcess } from '../test/support/processes.ts';
import { benchFlags, freshDatabase, percentiles, writeResult } from './support.ts';

const flags = benchFlags();
const RUNS = flags.quick ? 10 : 40;
const BACKLOG_RUNS = flags.quick ? 100 : 400;
const BACKLOG_AGENTS = 10;
const CREATE_CONCURRENCY = 20;
const ENV = { SWITCHYARD_SCALERS: 'none', LOG_LEVEL: 'warn' };

interface Samples {
  dispatch: number[];
  status: number[];
}

async function measure(owner: CoordinatorClient, agent: FakeAgent, label: string): Promise<Samples> {
  const samples: Samples = { dispatch: [], status: [] };
  for (let i = 0; i < RUNS; i++) {
    const started = Date.now();
    const runId = await owner.createRun(runStepsWorkflow(`lat-${i}`, label, [{ name: 'build', steps: [['s', 'true']] }]));
    const dispatch = await agent.next('job.dispatch', (d) => d.runId === runId, 30_000);
    samples.dispatch.push(Date.now() - started);
    const attempt = { runId, jobId: dispatch.jobId };
    agent.ack(attempt);
    agent.status(attempt, 'running');
    const sent = Date.now();
    agent.status(attempt, 'success');
    await owner.waitForRunStatus(runId, 'success', 30_000);
    const journal = await owner.journal(runId);
    const received = journal.find((e) => e.type === 'agent.job.status' && e.state === 'success')?.at;
    if (received !== undefined) samples.status.push(received - sent);
  }
  return samples;
}

/** Agents that answer every dispatch at once; `allDispatched` resolves once they received `expected` dispatches. */
async function answeringAgents(wsUrl: string, token: string, label: string, expected: number) {
  let dispatched = 0;
  let dispatchedAll = () => undefined as void;
  const allDispatched = new Promise<void>((resolve) => (dispatchedAll = resolve));
  const onDispatch = (dispatch: JobDispatchFrame, agent: FakeAgent) => {
    agent.runAtOnce(dispatch);
    agent.received.length = 0;
    if (++dispatched >= expected) dispatchedAll();
  };
  const agents = await Promise.all(Array.from({ length: BACKLOG_AGENTS }, () => FakeAgent.connect(wsUrl, token, { labels: [label], onDispatch })));
  return { agents, allDispatched };
}

/** Creates `BACKLOG_RUNS` runs on the owner at once and times until every job was dispatched and its run succeeded. */
async function drainBacklog(owner: CoordinatorClient, agentsUrl: string, token: string, label: string) {
  const { agents, allDispatched } = await answeringAgents(agentsUrl, token, label, BACKLOG_RUNS);
  const started = Date.now();
  const runIds: string[] = [];
  for (let i = 0; i < BACKLOG_RUNS; i += CREATE_CONCURRENCY) {
    const batch = Array.from({ length: Math.min(CREATE_CONCURRENCY, BACKLOG_RUNS - i) }, (_, j) => owner.createRun(runStepsWorkflow(`backlog-${i + j}`, label, [{ name: 'build', steps: [['s', 'true']] }])));
    runIds.push(...(await Promise.all(batch)));
  }
  await allDispatched;
  for (const runId of runIds.slice(-CREATE_CONCURRENCY)) await owner.waitForRunStatus(runId, 'success', 60_000);
  const seconds = (Date.now() - started) / 1000;
  for (const agent of agents) await agent.close();
  return { runs: BACKLOG_RUNS, agents: BACKLOG_AGENTS, seconds, jobsPerSecond: Math.round((BACKLOG_RUNS / seconds) * 10) / 10 };
}

async function main(): Promise<void> {
  const database = await freshDatabase('cross');
  const a = await startCoordinatorProcess({ DATABASE_URL: database.url, SWITCHYARD_COORDINATOR_ID: 'bench-a', ...ENV });
  const b = await startCoordinatorProcess({ DATABASE_URL: database.url, SWITCHYARD_COORDINATOR_ID: 'bench-b', ...ENV });
  try {
    const clientA = new CoordinatorClient(a.url, ADMIN_TOKEN);
    const token = (await clientA.createToken()).token;
    const localLabel = `local-${randomUUID().slice(0, 6)}`;
    const remoteLabel = `remote-${randomUUID().slice(0, 6)}`;
    const local = await FakeAgent.connect(clientA.wsUrl, token, { labels: [localLabel] });
    const clientB = new CoordinatorClient(b.url, ADMIN_TOKEN);
    const remote = await FakeAgent.connect(clientB.wsUrl, token, { labels: [remoteLabel] });
    const same = await measure(clientA, local, localLabel);
    const cross = await measure(clientA, remote, remoteLabel);
    const backlogSame = await drainBacklog(clientA, clientA.wsUrl, token, `${localLabel}-backlog`);
    const backlogCross = await drainBacklog(clientA, clientB.wsUrl, token, `${remoteLabel}-backlog`);
    const results = {
      runs: RUNS,
      sameCoordinator: { createToDispatchMs: percentiles(same.dispatch), statusToOwnerMs: percentiles(same.status), backlog: backlogSame },
      crossCoordinator: { createToDispatchMs: percentiles(cross.dispatch), statusToOwnerMs: percentiles(cross.status), backlog: backlogCross },
    };
    console.log(JSON.stringify(results, null, 2));
    console.log(`written to ${(await writeResult('cross-coordinator', flags, results)).pathname}`);
    await local.close();
    await remote.close();
  } finally {
    await stopProcess(a);
    await stopProcess(b);
    await database.drop();
  }
}

await main();
