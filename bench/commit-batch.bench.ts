// Group-commit throughput of commitBatch on both Postgres kinds, one batch at a time.
// Each event carries a ~1.4 KB snapshot, its run and job projections and a lease timer; every 4th
// an outbox effect. "spread": every entry of a batch is a different run (the worst case: one
// snapshot per event). "bursts": 8 consecutive events per run, folded into one snapshot.
// inFlight 2: two batches on disjoint runs committed concurrently (uses both cores).
// Run: node --import tsx bench/commit-batch.bench.ts [--quick] (3 s per case; --quick: 1 s, external only)
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { pino } from 'pino';
import { commitBatch } from '../src/db/commit-batch.ts';
import type { CommitEntry } from '../src/db/commit.types.ts';
import { claimCoordinatorLease } from '../src/db/coordinator-lease.ts';
import { openDatabase, type Database, type DatabaseKind } from '../src/db/database.ts';
import { benchFlags, writeResult } from './support.ts';

const flags = benchFlags();
const SECONDS = flags.quick ? 1 : 3;
const RUNS = 2_000;
const log = pino({ level: 'warn' });
const admin = { host: process.env.PGHOST ?? '127.0.0.1', port: Number(process.env.PGPORT ?? 5432), user: process.env.PGUSER ?? 'postgres', database: 'postgres' };

/** A snapshot about the size of a run with a handful of jobs (~2 KB of JSON). */
const SNAPSHOT = {
  status: 'active',
  value: { running: 'jobs' },
  context: { jobs: Object.fromEntries(Array.from({ length: 6 }, (_, i) => [`job-${i}`, { status: 'queued', attempt: 1, labels: ['linux', 'x64'], waiting: { kind: 'capacity', message: 'all matching agents are busy' } }])) },
  children: Object.fromEntries(Array.from({ length: 6 }, (_, i) => [`job-${i}`, { snapshot: { value: 'queued', context: { dispatchId: null, deadlines: {} } } }])),
};

function entryFor(runId: string, seq: number, at: number): CommitEntry {
  return {
    runId,
    isNewRun: seq === 1,
    events: [{ seq, event: { type: 'agent.job.status', at, jobKey: 'job-1', state: 'running' }, receivedAt: at, stateAfter: { run: 'jobs', jobs: { 'job-1': 'running' } } }],
    snapshot: { seq, machineId: 'run', machineVersion: 1001, snapshot: SNAPSHOT, status: 'running', updatedAt: at },
    run: { workflowName: 'build', repository: seq === 1 ? 'acme/app' : null, status: 'running', createdAt: at, finishedAt: null, failureReason: null, initFailure: null },
    jobs: [{ jobKey: 'job-1', status: 'running', waitingReason: null, attempt: 1, agentId: 'agent-1', dispatchId: `d-${seq}`, outcome: null, initFailure: null, steps: [], durationMs: null, outputs: null }],
    removedJobs: [],
    timers: [{ op: 'arm', deadlineId: 'lease:job-1', kind: 'lease', jobKey: 'job-1', dueAt: at + 120_000 }],
    effects: seq % 4 === 0 ? [{ effectId: `${runId}:${seq}:0`, kind: 'sendDispatch', payload: { jobKey: 'job-1' } }] : [],
  };
}

interface Case {
  batchSize: number;
  /** Consecutive events of one run in a batch (folded into one snapshot). */
  burst: number;
  /** Batches in flight at once, on disjoint runs (commitBatch is safe to overlap only then). */
  lanes: number;
}

async function measure(database: Database, { batchSize, burst, lanes }: Case): Promise<{ eventsPerSecond: number; p50Ms: number; p99Ms: number }> {
  const coordinatorId = `bench-${randomBytes(3).toString('hex')}`;
  const { epoch } = await claimCoordinatorLease(database.db, { id: coordinatorId, ttlMs: 3_600_000, now: Date.now() });
  const latencies: number[] = [];
  let events = 0;
  const started = performance.now();
  const lane = async (laneNo: number) => {
    const seqs = new Array<number>(RUNS).fill(0);
    let cursor = 0;
    while (performance.now() - started < SECONDS * 1_000) {
      const entries: CommitEntry[] = [];
      for (let i = 0; i < batchSize; i++) {
        seqs[cursor] = (seqs[cursor] ?? 0) + 1;
        entries.push(entryFor(`${coordinatorId}-${laneNo}-run-${cursor}`, seqs[cursor] ?? 1, Date.now()));
        if ((i + 1) % burst === 0) cursor = (cursor + 1) % RUNS;
      }
      cursor = (cursor + 1) % RUNS;
      const t = performance.now();
      await commitBatch(database.db, { coordinatorId, epoch, now: Date.now(), entries });
      latencies.push(performance.now() - t);
      events += batchSize;
    }
  };
  await Promise.all(Array.from({ length: lanes }, (_, i) => lane(i)));
  const elapsed = (performance.now() - started) / 1_000;
  latencies.sort((a, b) => a - b);
  const at = (q: number) => latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))] ?? 0;
  return { eventsPerSecond: Math.round(events / elapsed), p50Ms: Number(at(0.5).toFixed(2)), p99Ms: Number(at(0.99).toFixed(2)) };
}

const CASES: Case[] = [
  { batchSize: 1, burst: 1, lanes: 1 },
  { batchSize: 64, burst: 1, lanes: 1 },
  { batchSize: 64, burst: 8, lanes: 1 },
  { batchSize: 512, burst: 1, lanes: 1 },
  { batchSize: 512, burst: 8, lanes: 1 },
  { batchSize: 512, burst: 1, lanes: 2 },
];

async function withDatabase(kind: DatabaseKind, fn: (database: Database) => Promise<void>): Promise<void> {
  if (kind === 'embedded') {
    const dataDir = await mkdtemp(join(tmpdir(), 'sy-bench-'));
    const database = await openDatabase({ dataDir, databaseUrl: undefined }, log);
    try {
      await fn(database);
    } finally {
      await database.close();
      await rm(dataDir, { recursive: true, force: true });
    }
    return;
  }
  const name = `sy_bench_${randomBytes(4).toString('hex')}`;
  const client = new pg.Client(admin);
  await client.connect();
  await client.query(`CREATE DATABASE "${name}"`);
  const database = await openDatabase({ dataDir: tmpdir(), databaseUrl: `postgres://${admin.user}@${admin.host}:${admin.port}/${name}` }, log);
  try {
    await fn(database);
  } finally {
    await database.close();
    await client.query(`DROP DATABASE "${name}" WITH (FORCE)`);
    await client.end();
  }
}

/**
 * One ack's commit (a journal row, its run and job rows, the ack deadline disarmed, the lease armed,
 * no snapshot) with more and more live runs in the database, each holding two armed deadlines: what a
 * dispatch → ack costs in the database as the coordinator holds more waiting runs. Rows joined on their
 * key were once planned as 100 and found by reading all of `timers` (src/db/recordset.ts).
 */
async function ackAmongLiveRuns(database: Database, levels: readonly number[]): Promise<{ liveRuns: number; p50Ms: number; p90Ms: number }[]> {
  const coordinatorId = `bench-live-${randomBytes(3).toString('hex')}`;
  const { epoch } = await claimCoordinatorLease(database.db, { id: coordinatorId, ttlMs: 3_600_000, now: Date.now() });
  const commit = (entries: CommitEntry[]) => commitBatch(database.db, { coordinatorId, epoch, now: Date.now(), entries });
  const deadline = (deadlineId: string, kind: string) => ({ op: 'arm' as const, deadlineId, kind, jobKey: 'job-1', dueAt: Date.now() + 3_600_000 });
  const out: { liveRuns: number; p50Ms: number; p90Ms: number }[] = [];
  let live = 0;
  for (const [round, level] of levels.entries()) {
    for (; live < level; live += 512) {
      const count = Math.min(512, level - live);
      await commit(Array.from({ length: count }, (_, i) => ({ ...entryFor(`live-${live + i}`, 1, Date.now()), timers: [deadline('ack:job-1', 'ack'), deadline('workflow', 'workflow')] })));
    }
    live = level;
    const latencies: number[] = [];
    // The first 300 runs, each acked once per level (so at the next seq each time).
    for (let n = 0; n < 300; n++) {
      const ack = { ...entryFor(`live-${n}`, 2 + round, Date.now()), deferSnapshot: true, effects: [] };
      const acked = { ...ack, timers: [{ op: 'disarm' as const, deadlineId: 'ack:job-1' }, deadline('lease:job-1', 'lease')] };
      const started = performance.now();
      await commit([acked]);
      latencies.push(performance.now() - started);
    }
    latencies.sort((a, b) => a - b);
    const at = (q: number) => Number((latencies[Math.floor(q * latencies.length)] ?? 0).toFixed(2));
    out.push({ liveRuns: level, p50Ms: at(0.5), p90Ms: at(0.9) });
  }
  return out;
}

const results: Record<string, unknown>[] = [];
const acks: Record<string, unknown>[] = [];
const LIVE_LEVELS = flags.quick ? [2_000, 10_000] : [2_000, 10_000, 30_000];
const KINDS: DatabaseKind[] = flags.quick ? ['external'] : ['external', 'embedded'];
for (const kind of KINDS) {
  await withDatabase(kind, async (database) => {
    await measure(database, { batchSize: 64, burst: 1, lanes: 1 }); // warm-up: connections, plans, buffers
    for (const c of CASES) {
      const runs = c.burst === 1 ? 'spread' : `bursts of ${c.burst}`;
      results.push({ kind, batchSize: c.batchSize, runs, inFlight: c.lanes, ...(await measure(database, c)) });
    }
  });
  await withDatabase(kind, async (database) => {
    for (const level of await ackAmongLiveRuns(database, LIVE_LEVELS)) acks.push({ kind, ...level });
  });
}
console.table(results);
console.log('one ack committed, with live runs (two armed deadlines each) in the database:');
console.table(acks);
console.log(`results: ${(await writeResult('commit-batch', flags, { secondsPerCase: SECONDS, cases: results, ackAmongLiveRuns: acks })).pathname}`);
