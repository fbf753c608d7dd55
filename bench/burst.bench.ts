/**
 * Burst benchmark (issue 13): N signed pushes, one short `run:` job each, against one reference
 * agent process (`switchyard agent --max-concurrency 8`) and a real coordinator process on a fresh
 * Postgres database. Reports jobs/s from the first delivery received to the last run finished,
 * how many runs succeeded, and whether the agent was ever disconnected.
 * Run: node --no-node-snapshot --import tsx bench/burst.bench.ts [--quick] [--runs N] [--commit-batching off]
 */
import { randomBytes } from 'node:crypto';
import { awaitBurst, burstRepository, postPushes, startReferenceAgent } from '../test/support/burst.ts';
import { CoordinatorProcess } from './coordinator-process.ts';
import { benchFlags, freshDatabase, writeResult } from './support.ts';

const flags = benchFlags();
const SECRET = 'bench-burst-secret';
const ADMIN_TOKEN = `sya_bench_${randomBytes(8).toString('hex')}`;
const SLOTS = 8;
/** Deliveries in flight at once while the burst is posted. */
const WIDTH = 25;
/** Gives up only when no run finished for this long. */
const STALL_MS = 5 * 60_000;

function runsWanted(argv: string[]): number {
  const at = argv.indexOf('--runs');
  if (at < 0) return flags.quick ? 100 : 1000;
  const runs = Number(argv[at + 1]);
  if (!Number.isInteger(runs) || runs < 1) throw new Error(`--runs takes a positive integer, got ${String(argv[at + 1])}`);
  return runs;
}

/** Closes of the agent's socket as the coordinator logged them, and ack deadlines an alive agent missed. */
function coordinatorCounts(coordinator: CoordinatorProcess) {
  const closes = coordinator.logs.filter((l) => l.msg === 'closing agent socket').map((l) => Number(l['code']));
  return {
    closes4031: closes.filter((c) => c === 4031).length,
    closes4003: closes.filter((c) => c === 4003).length,
    ackDeadlinesMissedWhileAlive: coordinator.logs.filter((l) => l.msg === 'agent missed its ack deadline but is alive; socket kept').length,
  };
}

async function main(): Promise<void> {
  const runs = runsWanted(process.argv.slice(2));
  const database = await freshDatabase('burst');
  const { repo, sha } = await burstRepository();
  const env = { DATABASE_URL: database.url, GITHUB_WEBHOOK_SECRET: SECRET, SWITCHYARD_COMMIT_BATCHING: flags.commitBatching, SWITCHYARD_COORDINATOR_ID: 'bench-burst' };
  const coordinator = await CoordinatorProcess.start(env, ADMIN_TOKEN);
  const agent = await (async () => {
    await coordinator.client.json('/api/v1/repositories', { method: 'POST', body: JSON.stringify({ name: 'acme/app', provider: 'local', path: repo.path }) }, 201);
    const { token } = await coordinator.client.createToken();
    return startReferenceAgent({ wsUrl: coordinator.client.wsUrl, token, agentId: 'bench-burst-agent', maxConcurrency: SLOTS });
  })();
  try {
    const started = performance.now();
    await postPushes({ url: coordinator.client.url, secret: SECRET, sha, count: runs, width: WIDTH, prefix: 'bench-burst' });
    const postedMs = performance.now() - started;
    const outcome = await awaitBurst(database.url, runs, STALL_MS, (line) => console.log(`  ${line}`));
    const succeeded = outcome.statuses['success'] ?? 0;
    const seconds = outcome.elapsedMs / 1000;
    const results = {
      runs,
      agents: 1,
      slots: SLOTS,
      succeeded,
      statuses: outcome.statuses,
      elapsedMs: outcome.elapsedMs,
      postedMs: Math.round(postedMs),
      jobsPerSecond: seconds > 0 ? Math.round((succeeded / seconds) * 100) / 100 : 0,
      agentCloseCodes: agent.closeCodes(),
      agentRateLimitWarnings: agent.rateLimitWarnings(),
      coordinator: coordinatorCounts(coordinator),
      failures: outcome.failures,
    };
    console.log(`\nburst: ${runs} runs on 1 agent × ${SLOTS} slots: ${succeeded} succeeded in ${seconds.toFixed(1)} s = ${results.jobsPerSecond} jobs/s`);
    console.log(`agent disconnects: ${results.agentCloseCodes.length === 0 ? 'none' : results.agentCloseCodes.join(', ')}; ${JSON.stringify(results.coordinator)}`);
    console.log(`results: ${(await writeResult('burst', flags, results)).pathname}`);
  } finally {
    await agent.stop();
    await coordinator.stop();
    await database.drop();
    repo.remove();
  }
}

await main();
process.exit(0);
