/**
 * Webhook benchmark (issue: intake): `202` latency and webhook → `job.dispatch` latency at 1, 10
 * and 100 concurrent deliveries, against an in-process coordinator on a fresh Postgres database
 * with in-process agents. Run: `node --no-node-snapshot --import tsx bench/webhook.bench.ts`.
 */
import { randomBytes } from 'node:crypto';
import { mkdir, writeFile } from 'node:fs/promises';
import { sign } from '@octokit/webhooks-methods';
import pg from 'pg';
import { pino } from 'pino';
import { loadConfig } from '../src/config/index.ts';
import { findFreePort } from '../src/db/free-port.ts';
import { startCoordinator } from '../src/main.ts';
import { runIdFor } from '../src/pipeline/run-id.ts';
import { FakeAgent } from '../test/support/fake-agent.ts';
import { createLockRepo, lockFileWith, pushWorkflow, runJob } from '../test/support/lock-repo.ts';

const SECRET = 'bench-secret';
const AGENTS = 20;
const admin = { host: '127.0.0.1', port: 5432, user: process.env.PGUSER ?? 'postgres', database: 'postgres' };

function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return Math.round((sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? 0) * 100) / 100;
}

async function freshDatabaseUrl(): Promise<string> {
  const name = `sy_bench_${randomBytes(4).toString('hex')}`;
  const client = new pg.Client(admin);
  await client.connect();
  await client.query(`CREATE DATABASE "${name}"`);
  await client.end();
  return `postgres://${admin.user}@127.0.0.1:5432/${name}`;
}

async function main() {
  const repo = await createLockRepo();
  const sha = repo.commit({ '.kici/kici.lock.json': lockFileWith([pushWorkflow('bench', [runJob('build', ['true'])])]) });
  const port = await findFreePort();
  const config = loadConfig({
    DATABASE_URL: await freshDatabaseUrl(),
    PORT: String(port),
    GITHUB_WEBHOOK_SECRET: SECRET,
    SWITCHYARD_AGENT_AUTH: 'none',
    SWITCHYARD_ADMIN_TOKEN: 'bench-admin',
    SWITCHYARD_DATA_DIR: `/tmp/sy-bench-${port}`,
    LOG_LEVEL: 'silent',
  });
  const coordinator = await startCoordinator(config, pino({ level: 'silent' }));
  const api = (path: string, body: unknown) =>
    fetch(`${coordinator.url}${path}`, { method: 'POST', body: JSON.stringify(body), headers: { authorization: 'Bearer bench-admin' } });
  await api('/api/v1/repositories', { name: 'acme/app', provider: 'local', path: repo.path });
  const dispatchedAt = new Map<string, number>();
  for (let i = 0; i < AGENTS; i++) {
    await FakeAgent.connect(`${coordinator.url.replace('http', 'ws')}/ws/agent`, null, {
      labels: ['linux'],
      onDispatch: (dispatch, agent) => {
        dispatchedAt.set(dispatch.runId, performance.now());
        const attempt = { runId: dispatch.runId, jobId: dispatch.jobId };
        agent.ack(attempt);
        agent.status(attempt, 'running');
        agent.status(attempt, 'success');
      },
    });
  }
  const results: Record<string, Record<string, number>> = {};
  let counter = 0;
  for (const concurrency of [1, 10, 100]) {
    const accept: number[] = [];
    const toDispatch: number[] = [];
    const rounds = concurrency === 1 ? 100 : concurrency === 10 ? 30 : 5;
    for (let r = 0; r < rounds; r++) {
      await Promise.all(
        Array.from({ length: concurrency }, async () => {
          const deliveryId = `bench-${counter++}`;
          const body = JSON.stringify({ ref: 'refs/heads/main', after: sha, deleted: false, commits: [], repository: { full_name: 'acme/app', default_branch: 'main' }, sender: { id: 1, login: 'x' } });
          const started = performance.now();
          const res = await fetch(`${coordinator.url}/webhooks/github`, {
            method: 'POST',
            body,
            headers: { 'x-github-event': 'push', 'x-github-delivery': deliveryId, 'x-hub-signature-256': await sign(SECRET, body) },
          });
          accept.push(performance.now() - started);
          if (res.status !== 202) throw new Error(`webhook answered ${res.status}`);
          const runId = runIdFor('github', deliveryId, 'bench');
          for (let waited = 0; !dispatchedAt.has(runId) && waited < 10_000; waited += 1) await new Promise((resolve) => setTimeout(resolve, 1));
          toDispatch.push((dispatchedAt.get(runId) ?? NaN) - started);
        }),
      );
    }
    results[`concurrency_${concurrency}`] = {
      accept_p50_ms: percentile(accept, 50),
      accept_p99_ms: percentile(accept, 99),
      webhook_to_dispatch_p50_ms: percentile(toDispatch, 50),
      webhook_to_dispatch_p99_ms: percentile(toDispatch, 99),
      deliveries: accept.length,
    };
  }
  console.table(results);
  await mkdir('bench/results', { recursive: true });
  await writeFile('bench/results/webhook.json', JSON.stringify({ at: new Date().toISOString(), results }, null, 2));
  await coordinator.close();
  process.exit(0);
}

await main();
