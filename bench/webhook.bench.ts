/**
 * Webhook benchmark (issue: intake): `202` latency and webhook → `job.dispatch` latency at 1, 10
 * and 100 concurrent deliveries, against an in-process coordinator on a fresh Postgres database
 * with 20 in-process agents that finish every job at once. The coordinator runs on a worker thread
 * of its own (bench/coordinator-thread.ts), so the client's and agents' work is not counted as its
 * own; `--one-thread` puts it back on the thread of the client and agents, as earlier figures were
 * taken, and writes webhook.one-thread.json.
 * Then `sequential`: one delivery at a time, each once the previous run has finished (the issue's
 * "sequential warm deliveries"); `concurrency_1` sends the next one as soon as the previous is dispatched.
 * Run: node --no-node-snapshot --import tsx bench/webhook.bench.ts [--quick] [--commit-batching off] [--one-thread]
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { join } from 'node:path';
import { sign } from '@octokit/webhooks-methods';
import { runIdFor } from '../src/pipeline/run-id.ts';
import { FakeAgent } from '../test/support/fake-agent.ts';
import { createLockRepo, lockFileWith, pushWorkflow, runJob } from '../test/support/lock-repo.ts';
import { benchFlags, freshDatabase, httpPost, percentiles, writeResult } from './support.ts';
import { startBenchCoordinator, type BenchCoordinator } from './coordinator-thread.ts';

const flags = benchFlags();
const SECRET = 'bench-secret';
const ADMIN_TOKEN = 'bench-admin';
const AGENTS = 20;
const LABEL = 'linux';
/** Rounds per concurrency level: every round sends `concurrency` deliveries at once. */
const ROUNDS: Record<number, number> = flags.quick ? { 1: 40, 10: 10, 100: 2 } : { 1: 300, 10: 60, 100: 10 };
/** Deliveries of the sequential phase, each sent once the previous run has finished. */
const SEQUENTIAL = flags.quick ? 20 : 100;

/** When each run's first `job.dispatch` reached an agent, and who waits for it. */
class Dispatches {
  private readonly at = new Map<string, number>();
  private readonly waiters = new Map<string, () => void>();

  seen(runId: string): void {
    if (this.at.has(runId)) return;
    this.at.set(runId, performance.now());
    this.waiters.get(runId)?.();
    this.waiters.delete(runId);
  }

  /** Resolves with the dispatch time, or NaN when none came within 30 s. */
  async when(runId: string): Promise<number> {
    if (!this.at.has(runId)) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, 30_000);
        this.waiters.set(runId, () => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
    return this.at.get(runId) ?? NaN;
  }
}

async function connectAgents(coordinator: BenchCoordinator, dispatches: Dispatches): Promise<FakeAgent[]> {
  const url = `${coordinator.url.replace('http', 'ws')}/ws/agent`;
  const onDispatch = (dispatch: { runId: string; jobId: string }, agent: FakeAgent) => {
    dispatches.seen(dispatch.runId);
    const attempt = { runId: dispatch.runId, jobId: dispatch.jobId };
    agent.ack(attempt);
    agent.status(attempt, 'running');
    agent.status(attempt, 'success');
    agent.received.length = 0;
  };
  return Promise.all(Array.from({ length: AGENTS }, () => FakeAgent.connect(url, null, { labels: [LABEL], onDispatch })));
}

/** One push delivery: its `202` time and its webhook → `job.dispatch` time, in ms. */
async function deliver(coordinator: BenchCoordinator, dispatches: Dispatches, sha: string, deliveryId: string): Promise<[number, number]> {
  const body = JSON.stringify({ ref: 'refs/heads/main', after: sha, deleted: false, commits: [], repository: { full_name: 'acme/app', default_branch: 'main' }, sender: { id: 1, login: 'x' } });
  const headers = { 'x-github-event': 'push', 'x-github-delivery': deliveryId, 'x-hub-signature-256': await sign(SECRET, body) };
  const started = performance.now();
  const res = await httpPost(`${coordinator.url}/webhooks/github`, body, headers);
  const accepted = performance.now() - started;
  if (res.status !== 202) throw new Error(`webhook answered ${res.status}: ${res.text}`);
  return [accepted, (await dispatches.when(runIdFor('github', deliveryId, 'bench'))) - started];
}

/** Resolves once the run has finished (the agents answer every job at once). */
async function finished(coordinator: BenchCoordinator, runId: string): Promise<void> {
  const deadline = performance.now() + 30_000;
  while (performance.now() < deadline) {
    const res = await fetch(`${coordinator.url}/api/v1/runs/${runId}`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
    const status = res.ok ? ((await res.json()) as { run?: { status?: string } }).run?.status : undefined;
    if (status === 'success') return;
    if (status === 'failed' || status === 'cancelled') throw new Error(`run ${runId} ended ${status}`);
    await sleep(2);
  }
  throw new Error(`run ${runId} did not finish within 30 s`);
}

/**
 * One delivery at a time, each once the previous run has finished and the coordinator has had 20 ms
 * of quiet: the "sequential warm deliveries" (each of its runs ran to the end before the next
 * push). `concurrency_1` sends the next delivery the moment the previous one is dispatched, while
 * that run's ack, statuses and end are still being handled.
 */
async function measureSequential(coordinator: BenchCoordinator, dispatches: Dispatches, sha: string) {
  const accept: number[] = [];
  const toDispatch: number[] = [];
  for (let n = 0; n < SEQUENTIAL; n++) {
    const deliveryId = `bench-sequential-${n}`;
    const [a, d] = await deliver(coordinator, dispatches, sha, deliveryId);
    accept.push(a);
    toDispatch.push(d);
    await finished(coordinator, runIdFor('github', deliveryId, 'bench'));
    await sleep(20);
  }
  if (toDispatch.some(Number.isNaN)) throw new Error('a sequential delivery never reached an agent');
  return { deliveries: accept.length, acceptMs: percentiles(accept), webhookToDispatchMs: percentiles(toDispatch) };
}

async function measure(coordinator: BenchCoordinator, dispatches: Dispatches, sha: string) {
  const results: Record<string, { deliveries: number; acceptMs: ReturnType<typeof percentiles>; webhookToDispatchMs: ReturnType<typeof percentiles> }> = {};
  let counter = 0;
  for (const concurrency of [1, 10, 100]) {
    const accept: number[] = [];
    const toDispatch: number[] = [];
    for (let round = 0; round < (ROUNDS[concurrency] ?? 1); round++) {
      const samples = await Promise.all(Array.from({ length: concurrency }, () => deliver(coordinator, dispatches, sha, `bench-${counter++}`)));
      for (const [a, d] of samples) {
        accept.push(a);
        toDispatch.push(d);
      }
    }
    const missing = toDispatch.filter(Number.isNaN).length;
    if (missing > 0) throw new Error(`${missing} deliveries at concurrency ${concurrency} never reached an agent`);
    results[`concurrency_${concurrency}`] = { deliveries: accept.length, acceptMs: percentiles(accept), webhookToDispatchMs: percentiles(toDispatch) };
  }
  return results;
}

async function main(): Promise<void> {
  const database = await freshDatabase('webhook');
  const repo = await createLockRepo();
  const job = runJob('build', ['true'], { runsOn: [{ kind: 'exact', value: LABEL }] });
  const sha = repo.commit({ '.kici/kici.lock.json': lockFileWith([pushWorkflow('bench', [job])]) });
  const dataDir = await mkdtemp(join(tmpdir(), 'sy-bench-webhook-'));
  const env = {
    DATABASE_URL: database.url,
    PORT: '0',
    GITHUB_WEBHOOK_SECRET: SECRET,
    SWITCHYARD_AGENT_AUTH: 'none',
    SWITCHYARD_ADMIN_TOKEN: ADMIN_TOKEN,
    SWITCHYARD_DATA_DIR: dataDir,
    SWITCHYARD_COMMIT_BATCHING: flags.commitBatching,
    LOG_LEVEL: 'silent',
  };
  const coordinator = await startBenchCoordinator(env, null, !flags.oneThread);
  const dispatches = new Dispatches();
  const agents = await connectAgents(coordinator, dispatches);
  try {
    const body = JSON.stringify({ name: 'acme/app', provider: 'local', path: repo.path });
    const res = await fetch(`${coordinator.url}/api/v1/repositories`, { method: 'POST', body, headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
    if (!res.ok) throw new Error(`registering the repository: ${res.status} ${await res.text()}`);
    const results = await measure(coordinator, dispatches, sha);
    results['sequential'] = await measureSequential(coordinator, dispatches, sha);
    report(results);
    const name = flags.oneThread ? 'webhook.one-thread' : 'webhook';
    console.log(`results: ${(await writeResult(name, flags, { agents: AGENTS, coordinator: coordinator.placement, ...results })).pathname}`);
  } finally {
    await Promise.all(agents.map((agent) => agent.close()));
    await coordinator.close();
    await database.drop();
    await rm(dataDir, { recursive: true, force: true });
    repo.remove();
  }
}

function report(results: Awaited<ReturnType<typeof measure>>): void {
  const where = flags.oneThread ? 'on the thread of the client and agents' : 'on its own thread';
  console.log(`\nwebhook benchmark: ${AGENTS} agents, coordinator ${where}, commit batching ${flags.commitBatching} (latencies in ms)\n`);
  console.log(`${'concurrency'.padEnd(16)} ${'measure'.padEnd(22)} ${'n'.padStart(6)} ${'p50'.padStart(8)} ${'p95'.padStart(8)} ${'p99'.padStart(8)} ${'max'.padStart(8)}`);
  for (const [level, figures] of Object.entries(results)) {
    for (const [name, v] of [['202 accepted', figures.acceptMs], ['webhook → job.dispatch', figures.webhookToDispatchMs]] as const) {
      console.log(`${level.padEnd(16)} ${name.padEnd(22)} ${String(v.n).padStart(6)} ${String(v.p50).padStart(8)} ${String(v.p95).padStart(8)} ${String(v.p99).padStart(8)} ${String(v.max).padStart(8)}`);
    }
  }
}

await main();
process.exit(0);
