/**
 * `npm run chaos [-- --duration 120 --agents 8 --pinned 2 --burst 200 --rate 8 --fault-every 1500 --seed N]`:
 * two coordinators, several agents (`--pinned` of them reaching only coordinator B), a burst of
 * deliveries halfway, and random faults for a bounded time, then the invariants. Exits 1 when one
 * fails. Needs Postgres on 127.0.0.1:5432.
 */
import { parseArgs } from 'node:util';
import { chaosPassed, formatReport } from './report.ts';
import { runChaos } from './suite.ts';

const { values } = parseArgs({
  options: {
    duration: { type: 'string', default: '120' },
    agents: { type: 'string', default: '8' },
    pinned: { type: 'string', default: '2' },
    burst: { type: 'string', default: '200' },
    rate: { type: 'string', default: '8' },
    'fault-every': { type: 'string', default: '1500' },
    seed: { type: 'string' },
    verbose: { type: 'boolean', default: false },
  },
});
const seed = values.seed === undefined ? Math.floor(Math.random() * 2 ** 31) : Number(values.seed);
const started = Date.now();
const report = await runChaos({
  seed,
  durationMs: Number(values.duration) * 1000,
  agents: Number(values.agents),
  pinnedAgents: Number(values.pinned),
  burst: Number(values.burst),
  deliveriesPerSecond: Number(values.rate),
  faultEveryMs: Number(values['fault-every']),
  settleTimeoutMs: 120_000,
  log: values.verbose ? (line) => console.log(`[${((Date.now() - started) / 1000).toFixed(1)}s] ${line}`) : undefined,
});
console.log(formatReport(report));
process.exit(chaosPassed(report) ? 0 : 1);
