/**
 * Dispatch benchmark (issue 4 §6): one coordinator started in this process, on a worker thread of
 * its own (bench/coordinator-thread.ts), on a fresh external database; 50 scripted agents on this
 * thread (maxConcurrency 1) that answer every `job.dispatch` with ack → running → success at once.
 * Runs are created through POST /api/v1/runs.
 *
 * Measured (every clock is `wallNow()`, which the threads share):
 * - dispatch → ack round trip: commit of `placement.granted` (the transaction that records the
 *   dispatch intent and arms the ack deadline) → commit of `agent.job.ack`, both seen by the
 *   supervisor's commit observer. It spans the dispatch effect, the socket, the agent, routing,
 *   the job actor and the group commit;
 * - ack sent → ack committed: the agent's `job.ack` send → commit of `agent.job.ack`;
 * - create-run → job.dispatch: start of the POST → the agent receiving the frame;
 * - each of those idle too (one client, one run at a time), the floor of the path: 10 clients
 *   already keep this 2-core machine about half busy;
 * - in those two latency phases the runs go to the agents in turn (each agent also carries its id
 *   as a label): sent all to the lowest agent id, as `runsOnPick: deterministic` picks among idle
 *   agents, one socket got ~100 frames a second and past its 200-frame burst waited on the
 *   protocol's per-connection rate limit (100 messages/s), which is what the phases then measured;
 * - sustained runs/s and jobs/s with every run submitted at once.
 * - the coordinator loop's busy share in each throughput phase;
 * - the bare durable commit and round trip on the same database after the phases, and the idle
 *   latencies in bare commits.
 * `--one-thread` runs the coordinator on this thread too, as these figures were taken before: then
 * client, agents and coordinator share one event loop, and the figures are a floor.
 *
 * `--secrets` gives the coordinator a master key, as `npm start` on the embedded default has one: every
 * run then gets a key pair and every dispatch resolves its secrets (none are stored).
 *
 * Run: node --no-node-snapshot --import tsx bench/dispatch.bench.ts [--quick] [--runs N] [--commit-batching off] [--no-agent-compression] [--agent-compression on] [--one-thread] [--secrets]
 */
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { isTerminalRunStatus } from '../machines/status.ts';
import { startBenchCoordinator, wallNow, type BenchCoordinator, type CommittedMark } from './coordinator-thread.ts';
import { CoordinatorClient, FakeAgent, runStepsWorkflow, type JobDispatchFrame } from '../test/support/fake-agent.ts';
import { benchFlags, durabilityFloor, freshDatabase, percentiles, pool, ratio, writeResult, type Percentiles } from './support.ts';

const argv = process.argv.slice(2);
const flags = benchFlags(argv);
const quick = flags.quick;
const runsArg = argv.indexOf('--runs');
const THROUGHPUT_RUNS = runsArg >= 0 ? Number(argv[runsArg + 1]) : quick ? 500 : 3000;
const LATENCY_RUNS = quick ? 200 : 1000;
const LATENCY_CLIENTS = 10;
/** One run at a time: the path with nothing else in flight, its floor. */
const IDLE_RUNS = quick ? 100 : 300;
const FANOUT_RUNS = Math.round(THROUGHPUT_RUNS / 4);
const FANOUT_JOBS = 4;
const AGENTS = 50;
const LABEL = 'bench';
/** The stock agent offers permessage-deflate; `--no-agent-compression` makes the agents not offer it. */
const AGENTS_COMPRESS = !argv.includes('--no-agent-compression');
/** `--agent-compression on` makes the coordinator accept the offer (SWITCHYARD_AGENT_COMPRESSION; off by default). */
const COORDINATOR_COMPRESSION = argv.includes('--agent-compression') && argv[argv.indexOf('--agent-compression') + 1] === 'on' ? 'on' : 'off';
const SECRETS = argv.includes('--secrets');

/** Per dispatch id and per run: when each step of the path happened. */
class Timeline {
  readonly granted = new Map<string, number>();
  readonly ackCommitted = new Map<string, number>();
  readonly received = new Map<string, number>();
  readonly ackSent = new Map<string, number>();
  readonly dispatchOfRun = new Map<string, string>();
  readonly finished = new Map<string, { at: number; status: string }>();
  private waiters = new Map<string, (() => void)[]>();

  whenFinished(runId: string): Promise<void> {
    if (this.finished.has(runId)) return Promise.resolve();
    return new Promise((resolve) => this.waiters.set(runId, [...(this.waiters.get(runId) ?? []), resolve]));
  }

  finish(runId: string, status: string, at: number): void {
    if (this.finished.has(runId)) return;
    this.finished.set(runId, { at, status });
    for (const resolve of this.waiters.get(runId) ?? []) resolve();
    this.waiters.delete(runId);
  }
}

function between(from: Map<string, number>, to: Map<string, number>, ids: Iterable<string>): number[] {
  const out: number[] = [];
  for (const id of ids) {
    const a = from.get(id);
    const b = to.get(id);
    if (a !== undefined && b !== undefined) out.push(b - a);
  }
  return out;
}

function observe(timeline: Timeline): (mark: CommittedMark) => void {
  return (mark) => {
    if (mark.type === 'placement.granted' && mark.dispatchId) timeline.granted.set(mark.dispatchId, mark.at);
    if (mark.type === 'agent.job.ack' && mark.dispatchId) timeline.ackCommitted.set(mark.dispatchId, mark.at);
    if (isTerminalRunStatus(mark.status)) timeline.finish(mark.runId, mark.status, mark.at);
  };
}

async function connectAgents(client: CoordinatorClient, token: string, timeline: Timeline): Promise<FakeAgent[]> {
  const onDispatch = (dispatch: JobDispatchFrame, agent: FakeAgent) => {
    timeline.received.set(dispatch.jobId, wallNow());
    timeline.dispatchOfRun.set(dispatch.runId, timeline.dispatchOfRun.get(dispatch.runId) ?? dispatch.jobId);
    timeline.ackSent.set(dispatch.jobId, wallNow());
    agent.runAtOnce(dispatch);
    agent.received.length = 0;
  };
  const ids = Array.from({ length: AGENTS }, (_, i) => agentIdOf(i));
  return Promise.all(ids.map((agentId) => FakeAgent.connect(client.wsUrl, token, { compress: AGENTS_COMPRESS, agentId, labels: [LABEL, agentId], maxConcurrency: 1, onDispatch })));
}

interface PhaseResult {
  runs: number;
  jobs: number;
  seconds: number;
  runsPerSecond: number;
  jobsPerSecond: number;
  failed: number;
  /** CPU time of this process (coordinator, agents and client together) over wall time, in % of one core. */
  processCpuPercent: number;
  /** The coordinator's event loop: busy share of the phase's wall time, in %. */
  coordinatorLoopBusyPercent: number;
}

async function throughput(client: CoordinatorClient, coordinator: BenchCoordinator, timeline: Timeline, runs: number, jobsPerRun: number): Promise<PhaseResult & { runIds: string[] }> {
  const jobs = Array.from({ length: jobsPerRun }, (_, i) => ({ name: `job${i}`, steps: [['s', 'true']] as [string, string][] }));
  const workflow = runStepsWorkflow(`bench-${jobsPerRun}`, LABEL, jobs);
  const runIds: string[] = [];
  const started = wallNow();
  const cpu = process.cpuUsage();
  const loop = coordinator.utilization();
  await pool(runs, 64, async () => {
    runIds.push(await client.createRun(workflow));
  });
  await allFinished(client, timeline, runIds);
  const seconds = (Math.max(...runIds.map((id) => timeline.finished.get(id)?.at ?? 0)) - started) / 1000;
  const used = process.cpuUsage(cpu);
  const processCpuPercent = Math.round((used.user + used.system) / 1e4 / seconds);
  const coordinatorLoopBusyPercent = Math.round(coordinator.utilization(loop).utilization * 100);
  const failed = runIds.filter((id) => timeline.finished.get(id)?.status !== 'success').length;
  const round = (v: number) => Math.round(v * 10) / 10;
  return { runs, jobs: runs * jobsPerRun, seconds: round(seconds), runsPerSecond: round(runs / seconds), jobsPerSecond: round((runs * jobsPerRun) / seconds), failed, processCpuPercent, coordinatorLoopBusyPercent, runIds };
}

/** Waits for every run to end; a phase that stops making progress for 30 s fails, naming stuck jobs. */
async function allFinished(client: CoordinatorClient, timeline: Timeline, runIds: string[]): Promise<void> {
  let done = -1;
  for (;;) {
    const now = runIds.filter((id) => timeline.finished.has(id)).length;
    if (now === runIds.length) return;
    if (now === done) {
      const stuck = runIds.filter((id) => !timeline.finished.has(id)).slice(0, 5);
      const views = await Promise.all(stuck.map((id) => client.run(id)));
      throw new Error(`no progress for 30 s; ${runIds.length - now} runs open, e.g. ${JSON.stringify(views)}`);
    }
    done = now;
    await Promise.race([Promise.all(runIds.map((id) => timeline.whenFinished(id))), new Promise((resolve) => setTimeout(resolve, 30_000))]);
  }
}

function agentIdOf(n: number): string {
  return `bench-agent-${String(n % AGENTS).padStart(2, '0')}`;
}

/**
 * Closed loop below agent capacity, so create → dispatch is not queueing behind busy agents; run n
 * goes to agent n mod 50 (by its id label), so no agent's socket reaches the rate limit.
 */
async function latency(client: CoordinatorClient, timeline: Timeline, runs: number, clients: number): Promise<{ createToDispatch: number[]; runIds: string[] }> {
  const workflows = Array.from({ length: AGENTS }, (_, i) => runStepsWorkflow('bench-latency', agentIdOf(i), [{ name: 'build', steps: [['s', 'true']] }]));
  const createToDispatch: number[] = [];
  const runIds: string[] = [];
  await pool(runs, clients, async (n) => {
    const workflow = workflows[n % AGENTS] as object;
    const started = wallNow();
    const runId = await client.createRun(workflow);
    runIds.push(runId);
    await allFinished(client, timeline, [runId]);
    const dispatchId = timeline.dispatchOfRun.get(runId);
    const received = dispatchId === undefined ? undefined : timeline.received.get(dispatchId);
    if (received !== undefined) createToDispatch.push(received - started);
  });
  return { createToDispatch, runIds };
}

function dispatchIdsOf(timeline: Timeline, runIds: string[]): string[] {
  return runIds.flatMap((id) => {
    const dispatchId = timeline.dispatchOfRun.get(id);
    return dispatchId === undefined ? [] : [dispatchId];
  });
}

async function main(): Promise<void> {
  const database = await freshDatabase('dispatch');
  const dataDir = await mkdtemp(join(tmpdir(), 'sy-bench-dispatch-'));
  const adminToken = `sya_bench_${randomBytes(8).toString('hex')}`;
  const env = {
    DATABASE_URL: database.url,
    PORT: '0',
    SWITCHYARD_DATA_DIR: dataDir,
    SWITCHYARD_ADMIN_TOKEN: adminToken,
    SWITCHYARD_COORDINATOR_ID: 'bench-dispatch',
    SWITCHYARD_COMMIT_BATCHING: flags.commitBatching,
    SWITCHYARD_AGENT_COMPRESSION: COORDINATOR_COMPRESSION,
    LOG_LEVEL: 'silent',
    ...(SECRETS && { SWITCHYARD_SECRET_KEY: randomBytes(32).toString('hex') }),
  };
  const timeline = new Timeline();
  const coordinator = await startBenchCoordinator(env, observe(timeline), !flags.oneThread);
  const client = new CoordinatorClient(coordinator.url, adminToken);
  const agents = await connectAgents(client, (await client.createToken()).token, timeline);
  try {
    const warm = await throughput(client, coordinator, timeline, 100, 1);
    const idle = await latency(client, timeline, IDLE_RUNS, 1);
    const measured = await latency(client, timeline, LATENCY_RUNS, LATENCY_CLIENTS);
    const oneJob = await throughput(client, coordinator, timeline, THROUGHPUT_RUNS, 1);
    const loadedDispatches = dispatchIdsOf(timeline, oneJob.runIds);
    const fanout = await throughput(client, coordinator, timeline, FANOUT_RUNS, FANOUT_JOBS);
    const results = {
      idle: latencyFigures(timeline, idle, 1),
      unloaded: latencyFigures(timeline, measured, LATENCY_CLIENTS),
      saturated: {
        dispatchToAckRoundTripMs: percentiles(between(timeline.granted, timeline.ackCommitted, loadedDispatches)),
        ackSentToCommittedMs: percentiles(between(timeline.ackSent, timeline.ackCommitted, loadedDispatches)),
      },
      throughputOneJobRuns: stripIds(oneJob),
      throughputFourJobRuns: stripIds(fanout),
      warmupFailed: warm.failed,
      groupCommit: await commitFigures(client),
      floor: await durabilityFloor(database.url),
    };
    const idleInBareCommits = idleInCommits(results.idle, results.floor.bareCommitMs.p50);
    report(results, coordinator);
    console.log(`idle p50, in bare durable commits of ${results.floor.bareCommitMs.p50} ms (same Postgres, same run; round trip ${results.floor.roundTripMs.p50} ms): ${JSON.stringify(idleInBareCommits)}`);
    console.log(`group commit: ${JSON.stringify(results.groupCommit)}`);
    const setup = { agents: AGENTS, agentsCompress: AGENTS_COMPRESS, coordinatorCompression: COORDINATOR_COMPRESSION, secrets: SECRETS, coordinator: coordinator.placement, idleRuns: IDLE_RUNS, latencyRuns: LATENCY_RUNS, latencyClients: LATENCY_CLIENTS, database: 'external Postgres' };
    const name = `dispatch${flags.oneThread ? '.one-thread' : ''}${SECRETS ? '.secrets' : ''}`;
    console.log(`results: ${(await writeResult(name, flags, { setup, ...results, idleInBareCommits })).pathname}`);
  } finally {
    await Promise.all(agents.map((agent) => agent.close()));
    await coordinator.close();
    await database.drop();
    await rm(dataDir, { recursive: true, force: true });
  }
}

/** Each idle latency's p50 in bare durable commits. */
function idleInCommits(idle: ReturnType<typeof latencyFigures>, bareCommitMs: number): Record<string, number> {
  return {
    dispatchToAckRoundTripMs: ratio(idle.dispatchToAckRoundTripMs.p50, bareCommitMs),
    ackSentToCommittedMs: ratio(idle.ackSentToCommittedMs.p50, bareCommitMs),
    createRunToDispatchMs: ratio(idle.createRunToDispatchMs.p50, bareCommitMs),
  };
}

function latencyFigures(timeline: Timeline, measured: { createToDispatch: number[]; runIds: string[] }, clients: number) {
  const dispatches = dispatchIdsOf(timeline, measured.runIds);
  return {
    clients,
    dispatchToAckRoundTripMs: percentiles(between(timeline.granted, timeline.ackCommitted, dispatches)),
    ackSentToCommittedMs: percentiles(between(timeline.ackSent, timeline.ackCommitted, dispatches)),
    createRunToDispatchMs: percentiles(measured.createToDispatch),
  };
}

/** Mean transaction time and batch size over the whole benchmark, from the coordinator's /metrics. */
async function commitFigures(client: CoordinatorClient): Promise<{ transactions: number; meanCommitMs: number; meanBatchSize: number }> {
  const sample = (name: string) => client.metric(name);
  const transactions = await sample('switchyard_commit_seconds_count');
  const meanCommitMs = (await sample('switchyard_commit_seconds_sum')) / transactions * 1000;
  const meanBatchSize = (await sample('switchyard_group_commit_batch_size_sum')) / (await sample('switchyard_group_commit_batch_size_count'));
  return { transactions, meanCommitMs: Math.round(meanCommitMs * 100) / 100, meanBatchSize: Math.round(meanBatchSize * 100) / 100 };
}

function stripIds({ runIds: _ids, ...rest }: PhaseResult & { runIds: string[] }): PhaseResult {
  return rest;
}

function report(
  results: {
  idle: Record<string, unknown>;
  unloaded: Record<string, unknown>;
  saturated: Record<string, unknown>;
  throughputOneJobRuns: PhaseResult;
    throughputFourJobRuns: PhaseResult;
  },
  coordinator: BenchCoordinator,
): void {
  const rows: [string, string, unknown][] = [];
  for (const [phase, figures] of Object.entries({ idle: results.idle, unloaded: results.unloaded, saturated: results.saturated })) {
    for (const [name, value] of Object.entries(figures)) if (typeof value === 'object') rows.push([phase, name, value]);
  }
  const where = coordinator.placement === 'thread' ? 'on a thread of its own' : 'on the thread of the agents and client';
  console.log(`\ndispatch benchmark: ${AGENTS} agents, one coordinator ${where}, external Postgres, commit batching ${flags.commitBatching}${SECRETS ? ', secrets on (a master key)' : ''} (latencies in ms)\n`);
  console.log(`${'phase'.padEnd(10)} ${'measure'.padEnd(28)} ${'n'.padStart(6)} ${'p50'.padStart(8)} ${'p95'.padStart(8)} ${'p99'.padStart(8)} ${'max'.padStart(8)}`);
  for (const [phase, name, value] of rows) {
    const v = value as Percentiles;
    console.log(`${phase.padEnd(10)} ${name.padEnd(28)} ${String(v.n).padStart(6)} ${String(v.p50).padStart(8)} ${String(v.p95).padStart(8)} ${String(v.p99).padStart(8)} ${String(v.max).padStart(8)}`);
  }
  console.log('');
  for (const [name, t] of [['1-job runs', results.throughputOneJobRuns], ['4-job runs', results.throughputFourJobRuns]] as const) {
    const line = `${t.runs} runs / ${t.jobs} jobs in ${t.seconds} s: ${t.runsPerSecond} runs/s, ${t.jobsPerSecond} jobs/s`;
    console.log(`${name.padEnd(11)} ${line} (failed ${t.failed}, process CPU ${t.processCpuPercent}% of one core, coordinator loop busy ${t.coordinatorLoopBusyPercent}%)`);
  }
}

await main();
