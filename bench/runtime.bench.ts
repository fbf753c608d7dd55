/**
 * Supervisor benchmark (issue: durable runtime): persisted events/s at 1, 100 and 10 000
 * concurrent runs, with and without group commit; memory per idle run actor; adoption time
 * of 10 000 runs. Run: `node --expose-gc --import tsx bench/runtime.bench.ts [--quick]`.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import pg from 'pg';
import { pino } from 'pino';
import { connectDatabase } from '../src/db/database.ts';
import { migrateToLatest } from '../src/db/migrate.ts';
import type { Database } from '../src/db/database.ts';
import { planFor, startTestRuntime, waitingWorkflow } from '../test/support/runtime.ts';
import type { TestRuntime } from '../test/support/runtime.ts';
import { benchFlags, writeResult } from './support.ts';

const flags = benchFlags();
const quick = flags.quick;
const log = pino({ level: 'silent' });
const admin = { host: '127.0.0.1', port: 5432, user: process.env.PGUSER ?? 'postgres', database: 'postgres' };

async function freshDatabase(): Promise<{ database: Database; drop: () => Promise<void> }> {
  const name = `sy_bench_${randomBytes(4).toString('hex')}`;
  const client = new pg.Client(admin);
  await client.connect();
  await client.query(`CREATE DATABASE "${name}"`);
  const database = connectDatabase({ ...admin, password: '', database: name }, 'external', log);
  await migrateToLatest(database.db);
  return {
    database,
    drop: async () => {
      await database.close();
      await client.query(`DROP DATABASE "${name}" WITH (FORCE)`);
      await client.end();
    },
  };
}

async function createRuns(runtime: TestRuntime, count: number): Promise<string[]> {
  const ids = Array.from({ length: count }, () => randomUUID());
  for (let i = 0; i < ids.length; i += 1000) {
    await Promise.all(ids.slice(i, i + 1000).map((id) => runtime.supervisor.createRun({ input: planFor(id, waitingWorkflow('bench')), repository: null })));
  }
  return ids;
}

/** Each run is one stream of events sent one after another; streams run concurrently. */
async function eventsPerSecond(runs: number, eventsTotal: number, batching: boolean): Promise<number> {
  const { database, drop } = await freshDatabase();
  const runtime = await startTestRuntime(database.db, `bench-${runs}`, { SWITCHYARD_COMMIT_BATCHING: batching ? 'on' : 'off' }, log);
  const ids = await createRuns(runtime, runs);
  await runtime.executor.idle();
  const perRun = Math.max(1, Math.floor(eventsTotal / runs));
  const started = performance.now();
  await Promise.all(
    ids.map(async (id) => {
      for (let i = 0; i < perRun; i++) {
        const reason = { kind: 'capacity' as const, message: `all matching agents busy (${i})` };
        await runtime.supervisor.send(id, { type: 'placement.none', jobKey: 'build', reason });
      }
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  await runtime.stop();
  await drop();
  return Math.round((perRun * runs) / seconds);
}

async function memoryPerIdleRun(count: number): Promise<number> {
  const { database, drop } = await freshDatabase();
  const runtime = await startTestRuntime(database.db, 'bench-mem', {}, log);
  const gc = (globalThis as { gc?: () => void }).gc;
  gc?.();
  const before = process.memoryUsage().heapUsed;
  await createRuns(runtime, count);
  await runtime.executor.idle();
  gc?.();
  const bytes = (process.memoryUsage().heapUsed - before) / count;
  await runtime.stop();
  await drop();
  return Math.round(bytes);
}

async function adoptionMs(count: number): Promise<number> {
  const { database, drop } = await freshDatabase();
  const first = await startTestRuntime(database.db, 'bench-dead', {}, log);
  await createRuns(first, count);
  await first.executor.idle();
  await first.stop();
  await new Promise((resolve) => setTimeout(resolve, 500));
  const started = performance.now();
  const second = await startTestRuntime(database.db, 'bench-adopter', {}, log);
  const ms = performance.now() - started;
  const adopted = second.supervisor.size;
  await second.stop();
  await drop();
  if (adopted !== count) throw new Error(`adopted ${adopted} of ${count}`);
  return Math.round(ms);
}

async function main() {
  const big = quick ? 1000 : 10_000;
  const total = quick ? 5000 : 40_000;
  const results: Record<string, number> = {};
  for (const runs of [1, 100, big]) {
    results[`events_per_s_${runs}_runs_batched`] = await eventsPerSecond(runs, runs === 1 ? total / 10 : total, true);
    results[`events_per_s_${runs}_runs_unbatched`] = await eventsPerSecond(runs, runs === 1 ? total / 10 : total / 4, false);
  }
  results[`bytes_per_idle_run_${big}`] = await memoryPerIdleRun(big);
  results[`adoption_ms_${big}_runs`] = await adoptionMs(big);
  const big100 = results[`events_per_s_100_runs_batched`] ?? 0;
  const small100 = results[`events_per_s_100_runs_unbatched`] ?? 1;
  results['group_commit_gain_100_runs'] = Math.round((big100 / small100) * 10) / 10;
  const bigOn = results[`events_per_s_${big}_runs_batched`] ?? 0;
  results[`group_commit_gain_${big}_runs`] = Math.round((bigOn / (results[`events_per_s_${big}_runs_unbatched`] ?? 1)) * 10) / 10;
  const targets: Record<string, string> = {
    [`events_per_s_${big}_runs_batched`]: '≥ 20000',
    [`bytes_per_idle_run_${big}`]: '≤ 10240',
    [`adoption_ms_${big}_runs`]: '≤ 2000',
  };
  for (const [name, value] of Object.entries(results)) console.log(`${name.padEnd(36)} ${String(value).padStart(10)}  ${targets[name] ?? ''}`);
  console.log(`results: ${(await writeResult('runtime', flags, { bigRuns: big, ...results })).pathname}`);
}

await main();
