/**
 * Growth benchmark (issue 15): what live runs cost as their number grows. One coordinator in this
 * process on a fresh external database; live runs are created in-process (their job waits for a
 * label no agent has, so each run stays live with a job queued in the dispatcher); at each level
 * (1k, 10k, 50k live runs; --quick: 1k, 5k) it measures heap per live run, two ways: what the runs
 * added to reach the level cost each (after 200 runs of warm-up, so code compiled and caches filled
 * on first use are not counted), and the heap grown since the coordinator was ready ÷ live runs
 * (which counts them, and the probes of earlier levels), and, with 10 agents of
 * another label, create → `job.dispatch` and dispatch → ack committed for runs created through the
 * HTTP API one after another, plus one-job runs/s with 64 submitted at a time, and how long a
 * GET /metrics takes: the first scrape after the level's runs were created, and the median of five.
 * A scrape counts waiting jobs again only for the runs that changed since the last scrape (the
 * first one here: every run created to reach the level), not for every live job.
 *
 * The runs go to the agents in turn (each agent also carries its id as a label). Sent to whichever
 * agent `runsOnPick: deterministic` picked, the lowest id while it had a free slot, one socket carried
 * three frames per run, went past the protocol's per-connection rate limit (100 messages/s after a
 * burst of 200), and dispatch → ack measured that limit: 25 ms at 1,000 and 10,000 live runs, 8 ms
 * at 50,000, where runs came slower.
 *
 * Run: node --no-node-snapshot --expose-gc --import tsx bench/growth.bench.ts [--quick] [--levels 1000,10000,50000]
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PerformanceObserver } from 'node:perf_hooks';
import { pino } from 'pino';
import { loadConfig } from '../src/config/index.ts';
import { startCoordinator, type Coordinator } from '../src/main.ts';
import { CoordinatorClient, FakeAgent, runStepsWorkflow } from '../test/support/fake-agent.ts';
import { planFor, waitingWorkflow } from '../test/support/runtime.ts';
import { benchFlags, freshDatabase, percentiles, pool, ratio, writeResult, type Percentiles } from './support.ts';

const flags = benchFlags();
const argv = process.argv.slice(2);
const levelsArg = argv.indexOf('--levels');
const LEVELS = levelsArg >= 0 ? (argv[levelsArg + 1] ?? '').split(',').map(Number) : flags.quick ? [1000, 5000] : [1000, 10_000, 50_000];
const SAMPLES = flags.quick ? 100 : 300;
const THROUGHPUT_RUNS = flags.quick ? 300 : 1000;
const LABEL = 'growth';
const AGENTS = 10;

/** Live runs made before the first measure: what the first ones cost once (compiled code, caches) is not a run's. */
const WARM_UP_RUNS = 200;

interface Level {
  liveRuns: number;
  /** Heap after GC grown while the runs added to reach this level were made, ÷ those runs. */
  heapBytesPerLiveRun: number;
  /** Heap after GC grown since the coordinator was ready, warm-up and earlier levels' probes included, ÷ live runs. */
  heapBytesPerLiveRunSinceStart: number;
  createToDispatchMs: Percentiles;
  dispatchToAckCommittedMs: Percentiles;
  oneJobRunsPerSecond: number;
  /** Share of the throughput burst's wall time spent in garbage collection (the whole process: coordinator, agents, client). */
  gcShareOfBurst: number;
  /** GET /metrics, median of 5: the coordinator's thread is held that long by each Prometheus scrape. */
  metricsScrapeMs: number;
  /** The first of those 5, after the runs that reached this level were created: each changed since the scrape before. */
  metricsFirstScrapeMs: number;
}

const gc = (globalThis as { gc?: () => void }).gc ?? (() => undefined);

/** Milliseconds spent in garbage collection since the process started (every kind of collection). */
let gcMs = 0;
new PerformanceObserver((list) => {
  for (const entry of list.getEntries()) gcMs += entry.duration;
}).observe({ entryTypes: ['gc'] });

/** Live runs whose job waits for a label nobody has, created in-process 1000 at a time. */
async function addLiveRuns(coordinator: Coordinator, count: number): Promise<void> {
  const workflow = waitingWorkflow('growth-idle');
  for (let done = 0; done < count; done += 1000) {
    const batch = Array.from({ length: Math.min(1000, count - done) }, () => randomUUID());
    await Promise.all(batch.map((runId) => coordinator.runtime.createRun({ input: planFor(runId, workflow), repository: 'acme/app', inputSummary: { runId } })));
  }
  await coordinator.runtime.executor.idle();
}

function heapUsed(): number {
  gc();
  gc();
  return process.memoryUsage().heapUsed;
}

async function measureLevel(coordinator: Coordinator, client: CoordinatorClient, watch: Watch, liveRuns: number, heap: Pick<Level, 'heapBytesPerLiveRun' | 'heapBytesPerLiveRunSinceStart'>): Promise<Level> {
  const workflows = Array.from({ length: AGENTS }, (_, i) => runStepsWorkflow('growth-probe', agentIdOf(i), [{ name: 'build', steps: [['s', 'true']] }]));
  const workflow = (i: number) => workflows[i % AGENTS] as (typeof workflows)[number];
  const createToDispatch: number[] = [];
  const dispatchToAck: number[] = [];
  for (let i = 0; i < SAMPLES; i++) {
    const started = performance.now();
    const runId = await client.createRun(workflow(i));
    const timeline = await watch.finished(runId);
    createToDispatch.push(timeline.dispatched - started);
    dispatchToAck.push(timeline.ackCommitted - timeline.granted);
  }
  const scrapes: number[] = [];
  for (let i = 0; i < 5; i++) {
    const scrapeStarted = performance.now();
    await client.metrics();
    scrapes.push(performance.now() - scrapeStarted);
  }
  const [burstStarted, gcBefore] = [performance.now(), gcMs];
  await pool(THROUGHPUT_RUNS, 64, async (i) => void (await watch.finished(await client.createRun(workflow(i)))));
  const seconds = (performance.now() - burstStarted) / 1000;
  const gcShareOfBurst = Math.round(((gcMs - gcBefore) / (seconds * 1000)) * 1000) / 1000;
  return {
    liveRuns,
    ...heap,
    createToDispatchMs: percentiles(createToDispatch),
    dispatchToAckCommittedMs: percentiles(dispatchToAck),
    oneJobRunsPerSecond: Math.round((THROUGHPUT_RUNS / seconds) * 10) / 10,
    gcShareOfBurst,
    metricsScrapeMs: percentiles(scrapes).p50,
    metricsFirstScrapeMs: Math.round((scrapes[0] ?? NaN) * 100) / 100,
  };
}

function agentIdOf(n: number): string {
  return `growth-${n}`;
}

interface Timeline {
  granted: number;
  dispatched: number;
  ackCommitted: number;
}

/** Commit observer + agent callbacks: when each probe run was granted, dispatched, acked and finished. */
class Watch {
  private readonly marks = new Map<string, Partial<Timeline>>();
  private readonly waiters = new Map<string, (timeline: Timeline) => void>();

  constructor(coordinator: Coordinator) {
    coordinator.runtime.supervisor.observe((update) => {
      const type = (update.event as { type: string }).type;
      if (type === 'placement.granted') this.mark(update.runId, 'granted');
      if (type === 'agent.job.ack') this.mark(update.runId, 'ackCommitted');
      if (update.status === 'success') this.waiters.get(update.runId)?.(this.marks.get(update.runId) as Timeline);
    });
  }

  mark(runId: string, what: keyof Timeline): void {
    const marks = this.marks.get(runId) ?? {};
    marks[what] ??= performance.now();
    this.marks.set(runId, marks);
  }

  finished(runId: string): Promise<Timeline> {
    return new Promise((resolve) => this.waiters.set(runId, (timeline) => {
      this.waiters.delete(runId);
      this.marks.delete(runId);
      resolve(timeline);
    }));
  }
}

async function main(): Promise<void> {
  const database = await freshDatabase('growth');
  const dataDir = await mkdtemp(join(tmpdir(), 'sy-bench-growth-'));
  const adminToken = `sya_bench_${randomBytes(8).toString('hex')}`;
  const config = loadConfig({ DATABASE_URL: database.url, PORT: '0', SWITCHYARD_DATA_DIR: dataDir, SWITCHYARD_ADMIN_TOKEN: adminToken, SWITCHYARD_COORDINATOR_ID: 'bench-growth', LOG_LEVEL: 'silent' });
  const coordinator = await startCoordinator(config, pino({ level: 'silent' }));
  const client = new CoordinatorClient(coordinator.url, adminToken);
  const watch = new Watch(coordinator);
  const token = (await client.createToken()).token;
  const agents = await Promise.all(
    Array.from({ length: AGENTS }, (_, i) =>
      FakeAgent.connect(client.wsUrl, token, {
        agentId: agentIdOf(i),
        labels: [LABEL, agentIdOf(i)],
        maxConcurrency: 4,
        onDispatch: (dispatch, agent) => {
          watch.mark(dispatch.runId, 'dispatched');
          agent.runAtOnce(dispatch);
          agent.received.length = 0;
        },
      }),
    ),
  );
  const levels: Level[] = [];
  try {
    const start = heapUsed();
    await addLiveRuns(coordinator, WARM_UP_RUNS);
    let live = WARM_UP_RUNS;
    for (const target of LEVELS) {
      const before = heapUsed();
      await addLiveRuns(coordinator, target - live);
      const after = heapUsed();
      const heap = { heapBytesPerLiveRun: Math.round((after - before) / (target - live)), heapBytesPerLiveRunSinceStart: Math.round((after - start) / target) };
      live = target;
      const level = await measureLevel(coordinator, client, watch, live, heap);
      levels.push(level);
      const memory = `${level.heapBytesPerLiveRun} B heap per added run (${level.heapBytesPerLiveRunSinceStart} B per run since start)`;
      console.log(`${String(live).padStart(6)} live runs: ${memory}; create → dispatch p50 ${level.createToDispatchMs.p50} ms (p99 ${level.createToDispatchMs.p99}); dispatch → ack committed p50 ${level.dispatchToAckCommittedMs.p50} ms; ${level.oneJobRunsPerSecond} one-job runs/s (GC ${Math.round(level.gcShareOfBurst * 100)}% of the burst); /metrics ${level.metricsScrapeMs} ms (the first ${level.metricsFirstScrapeMs} ms)`);
    }
    const setup = { agents: 10, samples: SAMPLES, throughputRuns: THROUGHPUT_RUNS, warmUpRuns: WARM_UP_RUNS };
    const [first, last] = [levels[0], levels.at(-1)];
    const throughputKept = first && last ? ratio(last.oneJobRunsPerSecond, first.oneJobRunsPerSecond) : null;
    if (first && last) console.log(`throughput at ${last.liveRuns} live runs ÷ at ${first.liveRuns}: ${throughputKept}`);
    console.log(`results: ${(await writeResult('growth', flags, { setup, levels, throughputKept })).pathname}`);
  } finally {
    await Promise.all(agents.map((agent) => agent.close()));
    await coordinator.close();
    await database.drop();
    await rm(dataDir, { recursive: true, force: true });
  }
}

await main();
