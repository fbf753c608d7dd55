/**
 * `npm run bench`: every benchmark in turn, each in its own process (they start coordinators and
 * databases of their own), then one table of the headline figures beside their targets, also
 * written to bench/results/summary.json. Each benchmark leaves its own bench/results/<name>.json.
 *
 *   --quick      small sizes: a smoke run of the whole suite in a couple of minutes
 *   --compare    also run the webhook and dispatch load with group commit off and report the ratios
 *   --summary    only rebuild the table from the result files already there
 *   --against URL (with --against-ws, --against-token, --against-secret, --against-repo, --against-sha)
 *                also run bench/side-by-side.bench.ts: the same webhook load against that orchestrator
 *   --against-self  the same, against a second Switchyard of this build (checks the comparison itself)
 */
import { spawnSync } from 'node:child_process';
import { environment } from './support.ts';
import { buildSummary, printSummary } from './summary.ts';

const BENCHES = ['runtime', 'commit-batch', 'webhook', 'dispatch', 'growth', 'takeover', 'burst', 'cross-coordinator'];
/** The load run a second time with SWITCHYARD_COMMIT_BATCHING=off under --compare. */
const COMPARED = ['webhook', 'dispatch'];

function runBench(name: string, args: string[]): boolean {
  const file = `bench/${name}.bench.ts`;
  console.log(`\n=== ${file} ${args.join(' ')} ===`);
  const started = performance.now();
  const result = spawnSync(process.execPath, ['--no-node-snapshot', '--expose-gc', '--import', 'tsx', file, ...args], { stdio: 'inherit' });
  console.log(`=== ${file}: ${result.status === 0 ? 'done' : `exited with ${result.status ?? result.signal}`} in ${Math.round((performance.now() - started) / 1000)} s ===`);
  return result.status === 0;
}

async function main(): Promise<number> {
  const args = process.argv.slice(2);
  const quick = args.includes('--quick');
  const compare = args.includes('--compare');
  const environmentAtStart = environment();
  const since = args.includes('--summary') ? 0 : Date.now();
  const failed: string[] = [];
  if (since > 0) {
    const passArgs = quick ? ['--quick'] : [];
    for (const name of BENCHES) if (!runBench(name, passArgs)) failed.push(name);
    if (compare) for (const name of COMPARED) if (!runBench(name, [...passArgs, '--commit-batching', 'off'])) failed.push(`${name} (batching off)`);
    const against = args.flatMap((arg, i) => (arg.startsWith('--against') ? [arg, ...(arg === '--against-self' ? [] : [args[i + 1] ?? ''])] : []));
    if (against.length > 0 && !runBench('side-by-side', [...passArgs, ...against])) failed.push('side-by-side');
  }
  const { rows, file } = await buildSummary({ since, quick, compare, environmentAtStart, failed });
  const load = environmentAtStart.loadAverage.join(' / ');
  console.log(`\n=== summary${quick ? ' (--quick: small sizes)' : ''}: ${environmentAtStart.cpus} CPUs, load average at start ${load}, node ${process.version}, commit ${environmentAtStart.gitCommit.slice(0, 10)} ===`);
  printSummary(rows);
  if (failed.length > 0) console.log(`\nfailed: ${failed.join(', ')}`);
  console.log(`\n${file.pathname}`);
  return failed.length === 0 ? 0 : 1;
}

process.exit(await main());
