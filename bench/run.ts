/**
 * `npm run bench`: every benchmark in turn, each in its own process (they start coordinators and
 * databases of their own). Figures go to the console and to bench/results/*.json.
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';

const BENCHES = ['bench/runtime.bench.ts', 'bench/commit-batch.bench.ts', 'bench/webhook.bench.ts', 'bench/dispatch.bench.ts'];
const args = process.argv.slice(2);
let failed = 0;
for (const bench of BENCHES) {
  if (!existsSync(bench)) continue;
  console.log(`\n=== ${bench} ===`);
  const result = spawnSync(process.execPath, ['--no-node-snapshot', '--expose-gc', '--import', 'tsx', bench, ...args], { stdio: 'inherit' });
  if (result.status !== 0) {
    failed++;
    console.error(`${bench} exited with ${result.status ?? result.signal}`);
  }
}
process.exit(failed === 0 ? 0 : 1);
