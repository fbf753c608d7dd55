/**
 * `npm test`: every test file, in three tiers run one after another, reported as one run with one
 * summary. Unit files share one process; integration and end-to-end files each get a process of
 * their own, several at a time, on databases cloned from the run's migrated templates.
 *
 *   npm test                               the whole suite
 *   npm test -- test/unit/ws test/e2e/x.test.ts   only these files or folders (each in its tier)
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { relative } from 'node:path';
import { PassThrough } from 'node:stream';
import { finished } from 'node:stream/promises';
import { run } from 'node:test';
import { spec, type TestEvent } from 'node:test/reporters';
import { setUpTestDatabases, type TestRunDatabases } from './support/test-run-setup.ts';
import { publishSharedTestDatabases } from './support/test-databases.ts';
import { StallWatch } from './stall-watch.ts';
import { testFiles, TIERS, type Tier } from './tiers.ts';

const TEST_TIMEOUT_MS = 180_000;
/** No test event for this long (twice a test's timeout): the files still running are ended. */
const STALL_MS = 2 * TEST_TIMEOUT_MS;
const SUMMARY_KEYS = ['tests', 'suites', 'pass', 'fail', 'cancelled', 'skipped', 'todo'] as const;
type Counts = Record<(typeof SUMMARY_KEYS)[number], number>;

interface TierResult {
  readonly tier: Tier;
  readonly files: number;
  readonly seconds: number;
  readonly counts: Counts;
}

const zero = (): Counts => ({ tests: 0, suites: 0, pass: 0, fail: 0, cancelled: 0, skipped: 0, todo: 0 });
const isSummaryLine = (message: string) => SUMMARY_KEYS.some((key) => message.startsWith(`${key} `)) || message.startsWith('duration_ms ');

async function main(): Promise<number> {
  const selected = await testFiles(process.argv.slice(2));
  const started = performance.now();
  const report = new PassThrough({ objectMode: true });
  const printer = report.compose(spec);
  printer.pipe(process.stdout);
  const results: TierResult[] = [];
  const slowest: { file: string; seconds: number }[] = [];
  let databases: TestRunDatabases | undefined;
  try {
    for (const tier of TIERS) {
      const files = selected.get(tier.name) ?? [];
      if (files.length === 0) continue;
      // An in-process run ends only once this process's event loop is idle: no database yet.
      if (tier.isolation === 'process' && databases === undefined) {
        databases = await setUpTestDatabases();
        publishSharedTestDatabases(databases.shared);
      }
      results.push(await runTier(tier, files, report, slowest));
    }
  } finally {
    await databases?.teardown();
  }
  const total = results.reduce((sum, r) => addCounts(sum, r.counts), zero());
  const diagnostic = (message: string) => report.write({ type: 'test:diagnostic', data: { nesting: 0, message, level: 'info' } });
  for (const r of results) diagnostic(`tier ${r.tier.name}: ${r.seconds.toFixed(1)} s, ${r.files} files, ${r.counts.tests} tests (${r.tier.isolation === 'none' ? 'one process' : `${r.tier.concurrency} processes at a time`})`);
  for (const s of slowest.sort((a, b) => b.seconds - a.seconds).slice(0, 12)) diagnostic(`slow file: ${s.seconds.toFixed(1)} s ${s.file}`);
  for (const key of SUMMARY_KEYS) diagnostic(`${key} ${total[key]}`);
  diagnostic(`duration_ms ${(performance.now() - started).toFixed(0)}`);
  report.end();
  await finished(printer, { writable: false }); // its writable side never reports finishing
  await writeTierTimes(results);
  return total.fail > 0 || total.cancelled > 0 ? 1 : 0;
}

async function runTier(tier: Tier, files: readonly string[], report: PassThrough, slowest: { file: string; seconds: number }[]): Promise<TierResult> {
  const started = performance.now();
  let counts = zero();
  const concurrency = tier.isolation === 'none' ? true : tier.concurrency;
  const events: AsyncIterable<TestEvent> = run({ files: [...files], isolation: tier.isolation, concurrency, timeout: TEST_TIMEOUT_MS });
  const stalls = new StallWatch(STALL_MS, (message) => report.write({ type: 'test:diagnostic', data: { nesting: 0, message, level: 'error' } }));
  try {
    for await (const event of events) {
      stalls.saw(event);
      if (event.type === 'test:summary') {
        if (event.data.file === undefined) counts = countsOf(event.data.counts);
        else slowest.push({ file: relative(process.cwd(), event.data.file), seconds: event.data.duration_ms / 1000 });
      }
      if (event.type === 'test:diagnostic' && event.data.nesting === 0 && isSummaryLine(event.data.message)) continue;
      report.write(event);
    }
  } finally {
    stalls.stop();
  }
  return { tier, files: files.length, seconds: (performance.now() - started) / 1000, counts };
}

/** A run's counts; each test is counted once, as todo, cancelled, skipped, failed or passed (`failed` is not in the typings). */
function countsOf(c: { tests: number; suites: number; passed: number; cancelled: number; skipped: number; todo: number }): Counts {
  const fail = c.tests - c.passed - c.cancelled - c.skipped - c.todo;
  return { tests: c.tests, suites: c.suites, pass: c.passed, fail, cancelled: c.cancelled, skipped: c.skipped, todo: c.todo };
}

function addCounts(a: Counts, b: Counts): Counts {
  const sum = zero();
  for (const key of SUMMARY_KEYS) sum[key] = a[key] + b[key];
  return sum;
}

/** For `.ci/run`'s closing table of times. */
async function writeTierTimes(results: readonly TierResult[]): Promise<void> {
  await mkdir('test-artifacts', { recursive: true });
  const lines = results.map((r) => `test: ${r.tier.name}\t${r.seconds.toFixed(0)}\t${r.files} files, ${r.counts.tests} tests`);
  await writeFile('test-artifacts/test-tiers.tsv', `${lines.join('\n')}\n`);
}

const exitCode = await main();
// The in-process tier's harness sets the exit code of this process at exit from its own tests alone.
process.on('exit', () => (process.exitCode = exitCode));
