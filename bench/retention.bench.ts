/**
 * Retention benchmark (docs/retention.md), two parts on fresh external databases:
 *
 * 1. Disk stays bounded: on a simulated clock, every simulated day a few thousand runs end (each with
 *    a 15-event journal, a snapshot and 8 log chunks), then a retention pass runs with a 2-day window.
 *    After each day (and a plain VACUUM, as autovacuum would do) it prints the history tables' size,
 *    the whole database's, and the archives'. Flat after the window fills = bounded.
 * 2. Dispatch while a pass archives: a coordinator on its own thread, one scripted agent; create →
 *    job.dispatch latency of runs one at a time, first with nothing else going on, then while a pass
 *    started through POST /api/v1/retention archives 10,000 ended runs in the same coordinator.
 *
 * Run: node --no-node-snapshot --import tsx bench/retention.bench.ts [--quick]
 */
import { randomBytes } from 'node:crypto';
import { mkdtemp, readdir, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'kysely';
import { pino } from 'pino';
import { FileBlobStore } from '../src/blobs/file-blob-store.ts';
import { connectDatabase } from '../src/db/database.ts';
import { migrateToLatest } from '../src/db/migrate.ts';
import { RunArchives } from '../src/retention/archive.ts';
import { runRetentionPass } from '../src/retention/pass.ts';
import { seedEndedRuns } from '../test/support/ended-runs.ts';
import { CoordinatorClient, FakeAgent, runStepsWorkflow } from '../test/support/fake-agent.ts';
import { startBenchCoordinator, wallNow } from './coordinator-thread.ts';
import { benchFlags, freshDatabase, percentiles, writeResult } from './support.ts';

const flags = benchFlags();
const DAY = 86_400_000;
const DAYS = flags.quick ? 5 : 8;
const RUNS_PER_DAY = flags.quick ? 1_000 : 3_000;
const WINDOW_DAYS = 2;
const ARCHIVED_RUNS = flags.quick ? 2_000 : 10_000;
const LATENCY_RUNS = flags.quick ? 60 : 150;
const silent = pino({ level: 'silent' });
const mib = (bytes: number) => Number((bytes / 1_048_576).toFixed(1));

async function dirBytes(dir: string): Promise<number> {
  const entries = await readdir(dir, { recursive: true, withFileTypes: true }).catch(() => []);
  const sizes = await Promise.all(entries.filter((e) => e.isFile()).map(async (e) => (await stat(join(e.parentPath, e.name))).size));
  return sizes.reduce((sum, size) => sum + size, 0);
}

async function boundedDisk() {
  const database = await freshDatabase('retention_disk');
  const db = connectDatabase({ connectionString: database.url }, 'external', silent).db;
  const blobs = await mkdtemp(join(tmpdir(), 'sy-bench-retention-'));
  const archives = new RunArchives(new FileBlobStore(blobs));
  const days = [];
  try {
    await migrateToLatest(db);
    for (let day = 1; day <= DAYS; day++) {
      await seedEndedRuns(db, RUNS_PER_DAY, { events: 15, chunks: 8, endedAt: day * DAY, prefix: `d${day}-` });
      const passStarted = performance.now();
      const report = await runRetentionPass({ db, archives, now: () => day * DAY + 1, log: silent }, { runsOlderThanMs: WINDOW_DAYS * DAY, deliveriesOlderThanMs: WINDOW_DAYS * DAY }, { dryRun: false });
      await sql`VACUUM run_events, run_snapshots, job_logs`.execute(db);
      const { rows } = await sql<{ history: string; total: string }>`
        SELECT pg_total_relation_size('run_events') + pg_total_relation_size('run_snapshots') + pg_total_relation_size('job_logs') AS history,
               pg_database_size(current_database()) AS total`.execute(db);
      const row = { day, runsSoFar: day * RUNS_PER_DAY, archivedThisPass: report.runs.archived, passWallMs: Math.round(performance.now() - passStarted), historyTablesMiB: mib(Number(rows[0]?.history)), databaseMiB: mib(Number(rows[0]?.total)), archivesMiB: mib(await dirBytes(blobs)) };
      days.push(row);
      console.log(JSON.stringify(row));
    }
  } finally {
    await db.destroy();
    await database.drop();
  }
  return days;
}

async function dispatchDuringPass() {
  const database = await freshDatabase('retention_dispatch');
  const adminToken = `sya_bench_${randomBytes(8).toString('hex')}`;
  const env = {
    ...{ DATABASE_URL: database.url, PORT: '0', SWITCHYARD_DATA_DIR: await mkdtemp(join(tmpdir(), 'sy-bench-rd-')), SWITCHYARD_ADMIN_TOKEN: adminToken },
    ...{ SWITCHYARD_COORDINATOR_ID: 'bench-retention', SWITCHYARD_BLOB_STORE: 'files', SWITCHYARD_RETENTION_RUNS: 'off', SWITCHYARD_RETENTION_DELIVERIES: 'off', LOG_LEVEL: 'silent' },
  };
  const coordinator = await startBenchCoordinator(env, null, true);
  const client = new CoordinatorClient(coordinator.url, adminToken);
  const received = new Map<string, number>();
  const agent = await FakeAgent.connect(client.wsUrl, (await client.createToken()).token, {
    labels: ['bench'],
    onDispatch: (dispatch, a) => {
      received.set(dispatch.runId, wallNow());
      a.runAtOnce(dispatch);
    },
  });
  const db = connectDatabase({ connectionString: database.url }, 'external', silent).db;
  const workflow = runStepsWorkflow('bench-retention', 'bench', [{ name: 'build', steps: [['s', 'true']] }]);
  const oneAtATime = async (count: number, while_?: () => boolean) => {
    const samples: number[] = [];
    for (let i = 0; i < count && (while_?.() ?? true); i++) {
      const started = wallNow();
      const runId = await client.createRun(workflow);
      await client.waitForRunStatus(runId, 'success', 30_000);
      const at = received.get(runId);
      if (at !== undefined) samples.push(at - started);
    }
    return samples;
  };
  try {
    await seedEndedRuns(db, ARCHIVED_RUNS, { events: 15, chunks: 8, endedAt: Date.now() - 40 * DAY, prefix: 'old-' });
    await oneAtATime(20);
    const baseline = await oneAtATime(LATENCY_RUNS);
    let passing = true;
    const started = wallNow();
    const pass = fetch(`${coordinator.url}/api/v1/retention`, { method: 'POST', headers: { authorization: `Bearer ${adminToken}`, 'content-type': 'application/json' }, body: '{"olderThan":"1d"}' })
      .then(async (r) => ((await r.json()) as { report: { runs: { archived: number } } }).report)
      .finally(() => (passing = false));
    const during = await oneAtATime(LATENCY_RUNS * 10, () => passing);
    const report = await pass;
    return { archived: report.runs.archived, passSeconds: Number(((wallNow() - started) / 1000).toFixed(1)), baseline: percentiles(baseline), duringPass: percentiles(during), samplesDuringPass: during.length };
  } finally {
    await agent.close();
    await db.destroy();
    await coordinator.close();
    await database.drop();
  }
}

const disk = await boundedDisk();
const dispatch = await dispatchDuringPass();
console.log(JSON.stringify({ dispatch }, null, 2));
console.log(`results: ${(await writeResult('retention', flags, { disk, dispatch })).pathname}`);
