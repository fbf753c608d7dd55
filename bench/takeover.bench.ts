/**
 * Takeover benchmark (issue 8): coordinator A, a real child process on a fresh external database,
 * holds N live runs (jobs wait for a label no agent has; a 6 h workflow deadline stays armed).
 * Coordinator B is running and ready. A gets `kill -9`; measured, on this machine's wall clock:
 * - kill → all live: B's "restored runs are live" log line, written once every adopted run has been
 *   told `run.restored` and every deadline re-armed. B's /metrics is read once that line is out, and
 *   must show every run actor alive and every deadline armed. It is not polled meanwhile: polled every
 *   20 ms, as it was, the scrapes (each then walked every live job for `switchyard_jobs_waiting`, 10–15 ms
 *   with 10,000 runs; now each counts again the runs changed since the last, every adopted one
 *   changing) took 9% of B's thread while it reattached the runs;
 * - split: kill → owners moved (B's "…: adopting its runs" log line, written once its run_owner
 *   UPDATE committed; the run_owner rows polled as a cross-check) → all live (snapshots loaded,
 *   actors restored). A killed process lets its liveness lock go at once, so B adopts it once its
 *   renewals are overdue (1.5 renew intervals), not when its lease ends: the lease A had left at
 *   the kill (≤ TTL) is reported beside, as what B would have waited without the lock, and which
 *   of the two B went by.
 * Then one adopted run is cancelled through B's API to show the runs are live, and B in turn is
 * killed and adopted by C, which logs at `info` (the default level: the adoption's summary line, not one per run).
 *
 * Run: node --no-node-snapshot --import tsx bench/takeover.bench.ts [--quick] [--runs N]
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { TERMINAL_RUN_STATUSES } from '../src/db/run-status.ts';
import { waitingWorkflow } from '../test/support/runtime.ts';
import { CoordinatorProcess } from './coordinator-process.ts';
import { benchFlags, freshDatabase, pool, sleep, writeResult } from './support.ts';

const flags = benchFlags();
const runsArg = process.argv.indexOf('--runs');
const RUNS = runsArg >= 0 ? Number(process.argv[runsArg + 1]) : flags.quick ? 1000 : 10_000;
const LEASE = { SWITCHYARD_LEASE_RENEW_MS: '200', SWITCHYARD_LEASE_TTL_MS: '1000' };
const WORKFLOW_TIMEOUT_MS = 6 * 3_600_000;
const CREATE_CONCURRENCY = 64;
const POLL_MS = 20;
const ADMIN_TOKEN = `sya_bench_${randomBytes(8).toString('hex')}`;

interface Gauges {
  alive: number;
  timers: number;
  heapUsedBytes: number;
  rssBytes: number;
}

async function gauges(coordinator: CoordinatorProcess): Promise<Gauges> {
  const text = await coordinator.client.metrics();
  const value = (name: string) => Number(text.split('\n').find((l) => l.startsWith(`${name} `))?.split(' ')[1] ?? NaN);
  return {
    alive: value('switchyard_actors_alive'),
    timers: value('switchyard_timers_armed'),
    heapUsedBytes: value('nodejs_heap_size_used_bytes'),
    rssBytes: value('process_resident_memory_bytes'),
  };
}

/** Creates the runs through POST /api/v1/runs (there is no bulk path), 64 requests in flight. */
async function createRuns(coordinator: CoordinatorProcess, count: number): Promise<{ runIds: string[]; seconds: number; perSecond: number }> {
  const runIds: string[] = [];
  const started = performance.now();
  await pool(count, CREATE_CONCURRENCY, async (i) => {
    const workflow = waitingWorkflow(`takeover-${i % 50}`, { timeoutMs: WORKFLOW_TIMEOUT_MS });
    runIds.push(await coordinator.client.createRun(workflow));
  });
  const seconds = (performance.now() - started) / 1000;
  return { runIds, seconds: Math.round(seconds * 10) / 10, perSecond: Math.round(count / seconds) };
}

/**
 * Waits until the armed-deadline count has stopped moving; `alive` is counted in the database
 * (switchyard_actors_alive is set on restore and retire, not when a run is created).
 */
async function settled(coordinator: CoordinatorProcess, db: pg.Client, id: string): Promise<Gauges> {
  let last = await gauges(coordinator);
  for (let waited = 0; waited < 60_000; waited += 500) {
    await sleep(500);
    const now = await gauges(coordinator);
    if (now.timers === last.timers) return { ...now, alive: await liveRunsOwnedBy(db, id) };
    last = now;
  }
  throw new Error(`coordinator ${id} did not settle: ${JSON.stringify(last)}`);
}

async function liveRunsOwnedBy(db: pg.Client, id: string): Promise<number> {
  const { rows } = await db.query<{ n: number }>(
    `select count(*)::int as n from run_owner o join runs r using (run_id)
      where o.coordinator_id = $1 and r.status <> all($2::text[])`,
    [id, TERMINAL_RUN_STATUSES],
  );
  return rows[0]?.n ?? 0;
}

/** Polls until `check` returns a time (Date.now of the poll that saw it). */
async function firstSeen(check: () => Promise<boolean>, timeoutMs: number, what: string): Promise<number> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    if (await check()) return Date.now();
    if (Date.now() > until) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(POLL_MS);
  }
}

interface TakeoverResult {
  adopterLogLevel: string;
  runs: number;
  /** The headline: kill -9 → every run actor alive and every deadline re-armed on the adopter. */
  killToAllLiveMs: number;
  /** Why the adopter took the runs: the dead one's process was gone (its liveness lock free), or its lease ended. */
  adoptedBecause: 'process' | 'lease';
  /** Lease the dead coordinator still had when it died (≤ TTL): what the adopter would wait without the liveness lock. */
  leaseLeftAtKillMs: number;
  /** Kill → run_owner rows moved: the dead one seen dead (renewals overdue and lock free, or lease ended), the next scan, the UPDATE. */
  killToOwnersMovedMs: number;
  /** Owners moved → all live: load the snapshots, restore the actors, re-arm the deadlines. */
  ownersMovedToAllLiveMs: number;
  /** run_owner rows polled every 20 ms: when the adopter's count reached N (cross-check of the log). */
  killToOwnersMovedPolledMs: number;
  adopterBefore: Gauges;
  adopterAfter: Gauges;
}

type MsField = { [K in keyof TakeoverResult]: TakeoverResult[K] extends number ? K : never }[keyof TakeoverResult];

async function takeover(db: pg.Client, dead: { process: CoordinatorProcess; id: string }, adopter: { process: CoordinatorProcess; id: string; logLevel: string }, expected: Gauges): Promise<TakeoverResult> {
  const adopterBefore = await gauges(adopter.process);
  const killedAt = Date.now();
  await dead.process.kill9();
  const lease = await db.query<{ lease_until: string }>('select lease_until from coordinators where id = $1', [dead.id]);
  const leaseUntil = Number(lease.rows[0]?.lease_until);
  const countOwned = async () => (await db.query<{ n: number }>('select count(*)::int as n from run_owner where coordinator_id = $1', [adopter.id])).rows[0]?.n ?? 0;
  const ownersPolledAt = await firstSeen(async () => (await countOwned()) >= expected.alive, 60_000, 'the run_owner rows to move');
  const moved = await adopter.process.logged(/: adopting its runs$/, 5_000);
  const movedAt = moved.time;
  const allLiveAt = (await adopter.process.logged('restored runs are live: reattached, deadlines armed', 60_000)).time;
  const adopterAfter = await gauges(adopter.process);
  if (adopterAfter.alive < expected.alive || adopterAfter.timers < expected.timers) {
    throw new Error(`the adopter said its runs are live, but its metrics show ${JSON.stringify(adopterAfter)} against ${JSON.stringify(expected)}`);
  }
  return {
    adopterLogLevel: adopter.logLevel,
    runs: expected.alive,
    killToAllLiveMs: allLiveAt - killedAt,
    adoptedBecause: moved.msg.startsWith('lease expired') ? 'lease' : 'process',
    leaseLeftAtKillMs: leaseUntil - killedAt,
    killToOwnersMovedMs: movedAt - killedAt,
    ownersMovedToAllLiveMs: allLiveAt - movedAt,
    killToOwnersMovedPolledMs: ownersPolledAt - killedAt,
    adopterBefore,
    adopterAfter,
  };
}

/** Cancels one adopted run through the adopter's API and times it to its final status. */
async function cancelOne(coordinator: CoordinatorProcess, runId: string): Promise<{ runId: string; status: string; cancelToFinalMs: number }> {
  const started = performance.now();
  await coordinator.client.json(`/api/v1/runs/${runId}/cancel`, { method: 'POST', body: JSON.stringify({ reason: 'takeover bench' }) }, 202);
  const view = await coordinator.client.waitForRun(runId, (v) => ['cancelled', 'failed', 'success'].includes(v.run.status), 20_000, 'the cancelled run to end');
  return { runId, status: view.run.status, cancelToFinalMs: Math.round(performance.now() - started) };
}

function start(id: string, databaseUrl: string, logLevel = 'warn'): Promise<CoordinatorProcess> {
  return CoordinatorProcess.start({ DATABASE_URL: databaseUrl, SWITCHYARD_COORDINATOR_ID: id, LOG_LEVEL: logLevel, ...LEASE }, ADMIN_TOKEN);
}

async function main(): Promise<void> {
  const database = await freshDatabase('takeover');
  const db = new pg.Client({ connectionString: database.url });
  const started: CoordinatorProcess[] = [];
  try {
    const a = await start('coord-a', database.url);
    started.push(a);
    await db.connect();
    const { runIds, ...creation } = await createRuns(a, RUNS);
    const ownerBefore = await settled(a, db, 'coord-a');
    const b = await start('coord-b', database.url);
    started.push(b);
    await sleep(1000);
    const first = await takeover(db, { process: a, id: 'coord-a' }, { process: b, id: 'coord-b', logLevel: 'warn' }, ownerBefore);
    const live = await cancelOne(b, runIds[0] ?? '');
    const bSettled = await settled(b, db, 'coord-b');
    const c = await start('coord-c', database.url, 'info');
    started.push(c);
    await sleep(1000);
    const second = await takeover(db, { process: b, id: 'coord-b' }, { process: c, id: 'coord-c', logLevel: 'info' }, bSettled);
    const results = { runs: RUNS, lease: { renewMs: 200, ttlMs: 1000 }, creation: { ...creation, concurrency: CREATE_CONCURRENCY }, ownerBefore, takeover: first, liveAfterTakeover: live, secondTakeoverInfoLogs: second };
    report(creation, first, second, live);
    console.log(`results: ${(await writeResult('takeover', flags, results)).pathname}`);
  } finally {
    for (const coordinator of started) await coordinator.stop();
    await db.end().catch(() => undefined);
    await database.drop();
  }
}

function report(creation: { seconds: number; perSecond: number }, first: TakeoverResult, second: TakeoverResult, live: { status: string; cancelToFinalMs: number }): void {
  console.log(`\ntakeover benchmark: ${RUNS} live runs, lease renew 200 ms / TTL 1000 ms, real processes, external Postgres`);
  console.log(`created ${RUNS} runs through the API in ${creation.seconds} s (${creation.perSecond} runs/s, ${CREATE_CONCURRENCY} in flight)\n`);
  const rows: [string, MsField][] = [
    ['kill -9 → all live', 'killToAllLiveMs'],
    ['  kill → owners moved', 'killToOwnersMovedMs'],
    ['  owners moved → all live', 'ownersMovedToAllLiveMs'],
    ['lease left at the kill', 'leaseLeftAtKillMs'],
    ['kill → owners moved (polled)', 'killToOwnersMovedPolledMs'],
  ];
  console.log(`${'ms'.padEnd(32)} ${'A→B (warn)'.padStart(12)} ${'B→C (info)'.padStart(12)}`);
  for (const [label, key] of rows) console.log(`${label.padEnd(32)} ${String(first[key]).padStart(12)} ${String(second[key]).padStart(12)}`);
  console.log(`${'adopted because'.padEnd(32)} ${first.adoptedBecause.padStart(12)} ${second.adoptedBecause.padStart(12)}  (process: its liveness lock was free)`);
  console.log(`\nafter the takeover: one run cancelled through B's API → ${live.status} in ${live.cancelToFinalMs} ms`);
}

await main();
process.exit(0);
