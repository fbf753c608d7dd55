/**
 * The headline figures of issues 8 and 15, read from the result files the benchmarks wrote, each beside
 * its target: printed as one table and written to bench/results/summary.json.
 */
import { readFile, writeFile } from 'node:fs/promises';
import { environment, resultFile, RESULTS_DIR, type Environment } from './support.ts';

interface Target {
  op: '≤' | '≥';
  value: number;
  /** Which measured number is held against the target (e.g. `p50`). */
  judged: string;
}

export interface Row {
  figure: string;
  unit: string;
  p50?: number;
  p95?: number;
  p99?: number;
  value?: number;
  target?: Target;
  met?: boolean;
  /** The result file and field the figure comes from. */
  source: string;
  note?: string;
}

type Source = { name: string; at: string; data: unknown } | null;

async function load(name: string, commitBatching: 'on' | 'off', since: number): Promise<Source> {
  const file = resultFile(name, commitBatching);
  const text = await readFile(file, 'utf8').catch(() => null);
  if (text === null) return null;
  const data: unknown = JSON.parse(text);
  const at = dig(data, 'at');
  if (typeof at !== 'string' || Date.parse(at) < since) return null;
  return { name: file.pathname.split('/').pop() ?? name, at, data };
}

function dig(data: unknown, path: string): unknown {
  let at: unknown = data;
  for (const key of path.split('.')) at = typeof at === 'object' && at !== null ? (at as Record<string, unknown>)[key] : undefined;
  return at;
}

function num(source: Source, path: string): number | undefined {
  const value = dig(source?.data, path);
  return typeof value === 'number' && Number.isFinite(value) ? value : undefined;
}

function judge(row: Row): Row {
  const { target } = row;
  if (!target) return row;
  const measured = target.judged === 'value' ? row.value : row[target.judged as 'p50' | 'p95' | 'p99'];
  if (measured === undefined) return row;
  return { ...row, met: target.op === '≤' ? measured <= target.value : measured >= target.value };
}

function latency(figure: string, source: Source, path: string, target?: Target, note?: string): Row {
  const pick = (p: string) => num(source, `${path}.${p}`);
  return judge({ figure, unit: 'ms', p50: pick('p50'), p95: pick('p95'), p99: pick('p99'), target, source: `${source?.name ?? 'missing'}: ${path}`, note });
}

function value(figure: string, unit: string, source: Source, path: string, target?: Target, note?: string): Row {
  return judge({ figure, unit, value: num(source, path), target, source: `${source?.name ?? 'missing'}: ${path}`, note });
}

function ratio(figure: string, numerator: number | undefined, denominator: number | undefined, source: string, note: string): Row {
  const v = numerator === undefined || denominator === undefined || denominator === 0 ? undefined : Math.round((numerator / denominator) * 100) / 100;
  return { figure, unit: '×', value: v, source, note };
}

/** Issue 15's targets for webhook → job.dispatch, by concurrency: p50 ≤ 5 ms one at a time, p99 ≤ 100 ms at 100. */
const WEBHOOK_TO_DISPATCH_TARGETS: Record<number, Target> = { 1: { op: '≤', value: 5, judged: 'p50' }, 100: { op: '≤', value: 100, judged: 'p99' } };

function webhookRows(webhook: Source): Row[] {
  const levels = [1, 10, 100];
  return [
    ...levels.map((c) => latency(`webhook 202 latency, ${c} concurrent`, webhook, `results.concurrency_${c}.acceptMs`)),
    ...levels.map((c) => latency(`webhook → job.dispatch, ${c} concurrent`, webhook, `results.concurrency_${c}.webhookToDispatchMs`, WEBHOOK_TO_DISPATCH_TARGETS[c])),
    latency('webhook 202 latency, sequential', webhook, 'results.sequential.acceptMs'),
    latency('webhook → job.dispatch, sequential', webhook, 'results.sequential.webhookToDispatchMs', WEBHOOK_TO_DISPATCH_TARGETS[1],
      'one at a time, each once the previous run has finished, as the issue measured; "1 concurrent" sends the next at the dispatch'),
  ];
}

function dispatchRows(dispatch: Source): Row[] {
  const dispatchTarget: Target = { op: '≤', value: 5, judged: 'p50' };
  return [
    latency('dispatch → ack round trip (10 clients, unloaded)', dispatch, 'results.unloaded.dispatchToAckRoundTripMs', dispatchTarget,
      'the "dispatch p50 ≤ 5 ms" target is judged here: placement.granted committed → agent.job.ack committed'),
    latency('dispatch → ack round trip (one client, idle)', dispatch, 'results.idle.dispatchToAckRoundTripMs', undefined, 'the floor of the path: one run at a time'),
    latency('dispatch → ack round trip (saturated)', dispatch, 'results.saturated.dispatchToAckRoundTripMs'),
    latency('create run → job.dispatch (one client, idle)', dispatch, 'results.idle.createRunToDispatchMs'),
    latency('create run → job.dispatch (unloaded)', dispatch, 'results.unloaded.createRunToDispatchMs'),
    value('sustained runs/s, 1-job runs, 50 agents', 'runs/s', dispatch, 'results.throughputOneJobRuns.runsPerSecond', { op: '≥', value: 500, judged: 'value' }),
    value('sustained jobs/s, 1-job runs, 50 agents', 'jobs/s', dispatch, 'results.throughputOneJobRuns.jobsPerSecond'),
    value('sustained jobs/s, 4-job runs, 50 agents', 'jobs/s', dispatch, 'results.throughputFourJobRuns.jobsPerSecond', { op: '≥', value: 1_500, judged: 'value' }),
  ];
}

function runtimeRows(runtime: Source, takeover: Source): Row[] {
  const big = num(runtime, 'results.bigRuns') ?? 0;
  const runs = num(takeover, 'results.runs') ?? 0;
  return [
    value(`memory per idle run actor at ${big} runs`, 'B', runtime, `results.bytes_per_idle_run_${big}`, { op: '≤', value: 10_240, judged: 'value' }, 'heap growth after GC ÷ runs, in-process'),
    value(`takeover after kill -9, ${runs} live runs`, 'ms', takeover, 'results.takeover.killToAllLiveMs', { op: '≤', value: 2_000, judged: 'value' },
      'the target is judged here: kill → every actor alive and every deadline re-armed on the peer, the wait to see the dead one dead included'),
    value('  of which kill → owners moved', 'ms', takeover, 'results.takeover.killToOwnersMovedMs', undefined, 'dead seen (liveness lock free, renewals overdue) + next scan + run_owner UPDATE'),
    value('  restore alone: owners moved → all live', 'ms', takeover, 'results.takeover.ownersMovedToAllLiveMs'),
    value('  lease left at the kill (not waited for)', 'ms', takeover, 'results.takeover.leaseLeftAtKillMs'),
    value('takeover with the adopter logging at info', 'ms', takeover, 'results.secondTakeoverInfoLogs.killToAllLiveMs', undefined, 'one log line per restored run'),
    value(`in-process adoption of ${big} runs (runtime start)`, 'ms', runtime, `results.adoption_ms_${big}_runs`),
    value('group-commit gain, events/s at 100 runs', '×', runtime, 'results.group_commit_gain_100_runs', undefined, 'batched ÷ unbatched, supervisor.send streams'),
    value(`group-commit gain, events/s at ${big} runs`, '×', runtime, `results.group_commit_gain_${big}_runs`),
  ];
}

function burstRows(burst: Source): Row[] {
  const runs = num(burst, 'results.runs');
  const slots = num(burst, 'results.slots') ?? 8;
  return [
    value(`burst jobs/s, ${runs ?? '?'} pushes, 1 reference agent × ${slots} slots`, 'jobs/s', burst, 'results.jobsPerSecond', undefined,
      'first delivery received → last run finished; one short run: job per push, real agent and coordinator processes'),
    value('  of which runs succeeded', 'runs', burst, 'results.succeeded', runs === undefined ? undefined : { op: '≥', value: runs, judged: 'value' }, 'every run must succeed'),
  ];
}

function crossCoordinatorRows(cross: Source): Row[] {
  return [
    latency('create run → job.dispatch, agent on the owner', cross, 'results.sameCoordinator.createToDispatchMs'),
    latency('create run → job.dispatch, agent on a peer coordinator', cross, 'results.crossCoordinator.createToDispatchMs', undefined,
      'placement request and grant, dispatch and frames carried by Postgres LISTEN/NOTIFY between two coordinator processes'),
    latency('job.status sent → journaled by the owner, same coordinator', cross, 'results.sameCoordinator.statusToOwnerMs'),
    latency('job.status sent → journaled by the owner, through a peer', cross, 'results.crossCoordinator.statusToOwnerMs'),
    value('backlog of one-job runs, 10 agents on the owner', 'jobs/s', cross, 'results.sameCoordinator.backlog.jobsPerSecond'),
    value('backlog of one-job runs, 10 agents on a peer coordinator', 'jobs/s', cross, 'results.crossCoordinator.backlog.jobsPerSecond', undefined,
      'every run created on the owner at once; each job granted by the peer, dispatched and answered through Postgres'),
  ];
}

function compareRows(on: { dispatch: Source; webhook: Source }, off: { dispatch: Source; webhook: Source }): Row[] {
  const both = (a: Source, b: Source) => `${a?.name ?? 'missing'} / ${b?.name ?? 'missing'}`;
  const path = (source: Source, p: string) => num(source, p);
  return [
    ratio('batching on ÷ off: runs/s, 1-job runs', path(on.dispatch, 'results.throughputOneJobRuns.runsPerSecond'), path(off.dispatch, 'results.throughputOneJobRuns.runsPerSecond'), both(on.dispatch, off.dispatch), 'higher is better'),
    ratio('batching on ÷ off: jobs/s, 4-job runs', path(on.dispatch, 'results.throughputFourJobRuns.jobsPerSecond'), path(off.dispatch, 'results.throughputFourJobRuns.jobsPerSecond'), both(on.dispatch, off.dispatch), 'higher is better'),
    ratio('batching off ÷ on: dispatch → ack p50', path(off.dispatch, 'results.unloaded.dispatchToAckRoundTripMs.p50'), path(on.dispatch, 'results.unloaded.dispatchToAckRoundTripMs.p50'), both(off.dispatch, on.dispatch), '> 1: batching is faster'),
    ratio('batching off ÷ on: dispatch → ack p50, saturated', path(off.dispatch, 'results.saturated.dispatchToAckRoundTripMs.p50'), path(on.dispatch, 'results.saturated.dispatchToAckRoundTripMs.p50'), both(off.dispatch, on.dispatch), '> 1: batching is faster'),
    ratio('batching off ÷ on: webhook → dispatch p50, 100 concurrent', path(off.webhook, 'results.concurrency_100.webhookToDispatchMs.p50'), path(on.webhook, 'results.concurrency_100.webhookToDispatchMs.p50'), both(off.webhook, on.webhook), '> 1: batching is faster'),
  ];
}

/** The cost of growth (issue 15): at each level of live runs, the heap each costs and the latencies of new runs. */
function growthRows(growth: Source): Row[] {
  const levels = dig(growth?.data, 'results.levels');
  const count = Array.isArray(levels) ? levels.length : 0;
  return Array.from({ length: count }, (_, i) => {
    const path = `results.levels.${i}`;
    const live = num(growth, `${path}.liveRuns`) ?? 0;
    return [
      value(`heap per live run, at ${live} live runs`, 'B', growth, `${path}.heapBytesPerLiveRun`, undefined, 'heap after GC grown by the runs added to reach this level ÷ those runs'),
      latency(`  create run → job.dispatch, at ${live} live runs`, growth, `${path}.createToDispatchMs`),
      latency(`  dispatch → ack committed, at ${live} live runs`, growth, `${path}.dispatchToAckCommittedMs`),
      value(`  GET /metrics, at ${live} live runs`, 'ms', growth, `${path}.metricsScrapeMs`, undefined, 'median of 5; a scrape counts waiting jobs again only for the runs that changed since the last'),
      value(`  first GET /metrics after reaching ${live}`, 'ms', growth, `${path}.metricsFirstScrapeMs`, undefined, 'every run created to reach the level changed since the scrape before'),
    ];
  }).flat();
}

/** Issue 50's ratios: the way in bare durable commits measured in the same run, side by side with another orchestrator, growth kept. */
function ratioRows(side: Source, dispatch: Source, growth: Source): Row[] {
  const against = dig(side?.data, 'results.against');
  const other = typeof against === 'string' ? (against === 'self' ? 'a second Switchyard (the bench against itself: its noise)' : against) : 'another orchestrator';
  return [
    value('webhook → job.dispatch one at a time, in bare commits', 'commits', side, 'results.inBareCommits.switchyard.webhookToDispatchMs', { op: '≤', value: 5, judged: 'value' },
      'p50 ÷ a one-row durable commit measured on the same database in the same run (bench/side-by-side.bench.ts)'),
    value('dispatch → ack committed (one client, idle), in bare commits', 'commits', dispatch, 'results.idleInBareCommits.dispatchToAckRoundTripMs', { op: '≤', value: 3, judged: 'value' },
      'p50 ÷ a one-row durable commit measured on the same database in the same run (bench/dispatch.bench.ts)'),
    value('other ÷ Switchyard, webhook → job.dispatch one at a time', '×', side, 'results.ratios.webhookToDispatchMs', { op: '≥', value: 3, judged: 'value' }, `p50; the other: ${other}`),
    value('other ÷ Switchyard, webhook → job.dispatch in rounds of 10', '×', side, 'results.ratios.roundOf10ToDispatchMs', { op: '≥', value: 2, judged: 'value' }, `p50; the other: ${other}`),
    value('one-job runs/s at the last growth level ÷ the first', '×', growth, 'results.throughputKept', { op: '≥', value: 0.8, judged: 'value' }, '50,000 live runs against 1,000 by default'),
  ];
}

export interface SummaryOptions {
  /** Result files written before this instant (ms) are stale and left out. */
  since: number;
  quick: boolean;
  compare: boolean;
  environmentAtStart: Environment;
  failed: string[];
}

export async function buildSummary(options: SummaryOptions): Promise<{ rows: Row[]; file: URL }> {
  const sources: Record<string, unknown> = {};
  const get = async (name: string, batching: 'on' | 'off' = 'on') => {
    const source = await load(name, batching, options.since);
    if (source) sources[source.name] = { at: source.at, quick: dig(source.data, 'quick'), environment: dig(source.data, 'environment') };
    return source;
  };
  const on = { dispatch: await get('dispatch'), webhook: await get('webhook') };
  const growth = await get('growth');
  const rows = [...webhookRows(on.webhook), ...dispatchRows(on.dispatch), ...runtimeRows(await get('runtime'), await get('takeover')), ...growthRows(growth), ...burstRows(await get('burst')), ...crossCoordinatorRows(await get('cross-coordinator'))];
  rows.push(...ratioRows(await get('side-by-side'), on.dispatch, growth));
  if (options.compare) rows.push(...compareRows(on, { dispatch: await get('dispatch', 'off'), webhook: await get('webhook', 'off') }));
  const file = new URL('summary.json', RESULTS_DIR);
  const body = { at: new Date().toISOString(), quick: options.quick, compare: options.compare, failedBenches: options.failed, environment: { atStart: options.environmentAtStart, atEnd: environment() }, figures: rows, sources };
  await writeFile(file, `${JSON.stringify(body, null, 2)}\n`);
  return { rows, file };
}

function measured(row: Row): string {
  const f = (v: number | undefined) => (v === undefined ? '?' : String(v));
  if (row.p50 !== undefined || row.p95 !== undefined || row.p99 !== undefined) return `p50 ${f(row.p50)} · p95 ${f(row.p95)} · p99 ${f(row.p99)} ${row.unit}`;
  return row.value === undefined ? 'missing' : `${row.value} ${row.unit}`;
}

export function printSummary(rows: Row[]): void {
  const lines = rows.map((row) => {
    const target = row.target ? `${row.target.judged === 'value' ? '' : `${row.target.judged} `}${row.target.op} ${row.target.value} ${row.unit}` : '';
    const status = row.met === undefined ? (row.target ? 'no figure' : '') : row.met ? 'met' : 'NOT MET';
    return [row.figure, measured(row), target, status];
  });
  const widths = [0, 1, 2, 3].map((i) => Math.max(...[['figure', 'measured', 'target', 'status'], ...lines].map((l) => (l[i] ?? '').length)));
  const format = (l: string[]) => l.map((cell, i) => cell.padEnd(widths[i] ?? 0)).join('  ').trimEnd();
  console.log(`\n${format(['figure', 'measured', 'target', 'status'])}\n${widths.map((w) => '─'.repeat(w)).join('  ')}`);
  for (const line of lines) console.log(format(line));
}
