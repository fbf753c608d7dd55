/**
 * Cross-coordinator latency: two coordinator processes on one database; runs are created on A and
 * their one job runs on an agent connected to B (any agent serves any run), or, for comparison, on an
 * agent connected to A. Figures: create run → job.dispatch at the agent, and job.status sent → the
 * owner journals it (both one-way, same machine clock). Postgres LISTEN/NOTIFY carries the wake-ups.
 *
 *   node --no-node-snapshot --import tsx bench/cross-coordinator.bench.ts [--quick]
 */
import { randomUUID } from 'node:crypto';
import { CoordinatorClient, FakeAgent, runStepsWorkflow } from '../test/support/fake-agent.ts';
import { ADMIN_TOKEN, startCoordinatorProcess, stopProcess } from '../test/support/processes.ts';
import { benchFlags, freshDatabase, percentiles, writeResult } from './support.ts';

const flags = benchFlags();
const RUNS = flags.quick ? 10 : 40;
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
    const remote = await FakeAgent.connect(new CoordinatorClient(b.url, ADMIN_TOKEN).wsUrl, token, { labels: [remoteLabel] });
    const same = await measure(clientA, local, localLabel);
    const cross = await measure(clientA, remote, remoteLabel);
    const results = {
      runs: RUNS,
      sameCoordinator: { createToDispatchMs: percentiles(same.dispatch), statusToOwnerMs: percentiles(same.status) },
      crossCoordinator: { createToDispatchMs: percentiles(cross.dispatch), statusToOwnerMs: percentiles(cross.status) },
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
