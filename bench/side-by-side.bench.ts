/**
 * Side by side (issue 15): the same webhook load against this build of Switchyard and against any
 * other orchestrator that speaks the KiCI agent protocol, on the same machine, with the same
 * in-process agents (they answer every `job.dispatch` with ack → running → success at once).
 *
 * Measured per target: `202` time, and webhook → `job.dispatch` at an agent, one delivery at a time
 * and in rounds of 10 at once (for a round, each dispatch's arrival after the round started, so no
 * target has to say which run a dispatch belongs to). Printed with the ratio other / Switchyard.
 *
 * This build runs in a child process on a fresh database with a local lock repository it makes.
 * The other orchestrator is yours to start; tell the bench where it is and what it needs:
 *
 *   --against http://127.0.0.1:3000      its HTTP base (webhooks at /webhooks/github)
 *   --against-ws ws://127.0.0.1:3000/ws/agent   (default: the HTTP base's /ws/agent)
 *   --against-token <agent token>         sent in auth.request (omit when it needs none)
 *   --against-secret <webhook secret>     GitHub HMAC secret it verifies
 *   --against-repo owner/name --against-sha <commit>   a repository it reads, with a lock file at
 *                                         that commit whose push workflow runs one job on label `bench`
 *   --against-generic <org>/<source>      post to its generic route /webhook/<org>/generic/<source> with
 *                                         x-event-type and x-delivery-id instead (KiCI 0.1.24's independent
 *                                         mode, whose local sources have no GitHub route and check no signature)
 *   --against-self                        start a second Switchyard as the "other" (checks the bench itself)
 *
 * Printed besides: the bare durable commit and round trip on the same Postgres, measured in the
 * same run (bench/support.ts durabilityFloor), each figure in those units, and this build's stage
 * budget for the one-at-a-time phase (bench/stage-budget.ts).
 *
 * Run: node --no-node-snapshot --import tsx bench/side-by-side.bench.ts [--quick] [--against … | --against-self]
 */
import { randomBytes } from 'node:crypto';
import { sign } from '@octokit/webhooks-methods';
import { FakeAgent } from '../test/support/fake-agent.ts';
import { createLockRepo, lockFileWith, pushWorkflow, runJob } from '../test/support/lock-repo.ts';
import { CoordinatorProcess } from './coordinator-process.ts';
import { benchFlags, durabilityFloor, freshDatabase, httpPost, percentiles, ratio, writeResult, type DurabilityFloor, type Percentiles } from './support.ts';
import { printBudget, sampleStages, stageBudget, type StageLine, type StageSample } from './stage-budget.ts';

const flags = benchFlags();
const argv = process.argv.slice(2);
const arg = (name: string): string | undefined => (argv.includes(name) ? argv[argv.indexOf(name) + 1] : undefined);
const SEQUENTIAL = flags.quick ? 30 : 200;
const ROUNDS = flags.quick ? 5 : 30;
const ROUND_SIZE = 10;
const AGENTS = 12;
const LABEL = 'bench';

interface Target {
  name: string;
  httpUrl: string;
  wsUrl: string;
  agentToken: string | null;
  secret: string;
  repository: string;
  sha: string;
  /** Where and how webhooks are posted: GitHub's route and signature, or a KiCI local source's generic route. */
  webhook: { kind: 'github' } | { kind: 'generic'; path: string };
  /** This build's /metrics (the stage budget); null for another orchestrator. */
  metrics: (() => Promise<string>) | null;
  /** Its database, where the durability floor is measured. */
  databaseUrl: string | null;
  stop: () => Promise<void>;
}

interface TargetFigures {
  acceptMs: Percentiles;
  webhookToDispatchMs: Percentiles;
  roundOf10ToDispatchMs: Percentiles;
  /** This build only: the one-at-a-time phase's stage budget. */
  budget?: StageLine[];
  /** This build only: the bare commit and round trip on its database, right after its phases. */
  floor?: DurabilityFloor;
}

const MEASURES = ['acceptMs', 'webhookToDispatchMs', 'roundOf10ToDispatchMs'] as const;

/** A Switchyard of this build in its own process, with a repository it can read and a fresh database. */
async function startSwitchyard(name: string): Promise<Target> {
  const database = await freshDatabase(`side-${name}`);
  const repo = await createLockRepo();
  const sha = repo.commit({ '.kici/kici.lock.json': lockFileWith([pushWorkflow('bench', [runJob('build', ['true'], { runsOn: [{ kind: 'exact', value: LABEL }] })])]) });
  const secret = randomBytes(8).toString('hex');
  const coordinator = await CoordinatorProcess.start({ DATABASE_URL: database.url, GITHUB_WEBHOOK_SECRET: secret, SWITCHYARD_AGENT_AUTH: 'none' }, `sya_${randomBytes(8).toString('hex')}`);
  await coordinator.client.json('/api/v1/repositories', { method: 'POST', body: JSON.stringify({ name: 'acme/app', provider: 'local', path: repo.path }) }, 201);
  const httpUrl = coordinator.client.url;
  return {
    ...{ name, httpUrl, wsUrl: `${httpUrl.replace('http', 'ws')}/ws/agent`, agentToken: null, secret, repository: 'acme/app', sha },
    ...{ webhook: { kind: 'github' as const }, metrics: () => coordinator.client.metrics(), databaseUrl: database.url },
    stop: async () => {
      await coordinator.stop();
      await database.drop();
      repo.remove();
    },
  };
}

function externalTarget(httpUrl: string): Target {
  const need = (name: string) => arg(name) ?? (() => { throw new Error(`${name} is required with --against`); })();
  const generic = arg('--against-generic');
  const [org, source] = generic?.split('/') ?? [];
  if (generic !== undefined && (!org || !source)) throw new Error(`--against-generic takes <org>/<source>, got ${generic}`);
  return {
    ...{ name: 'other', httpUrl, wsUrl: arg('--against-ws') ?? `${httpUrl.replace('http', 'ws')}/ws/agent`, agentToken: arg('--against-token') ?? null },
    ...{ secret: generic ? '' : need('--against-secret'), repository: need('--against-repo'), sha: need('--against-sha') },
    ...{ webhook: org && source ? { kind: 'generic' as const, path: `/webhook/${org}/generic/${source}` } : { kind: 'github' as const }, metrics: null, databaseUrl: null },
    stop: () => Promise.resolve(),
  };
}

/** Agents that time every dispatch they receive and finish it at once. */
async function connectAgents(target: Target, arrivals: number[]): Promise<FakeAgent[]> {
  const onDispatch = (dispatch: { runId: string; jobId: string }, agent: FakeAgent) => {
    arrivals.push(performance.now());
    agent.runAtOnce(dispatch);
    agent.received.length = 0;
  };
  return Promise.all(Array.from({ length: AGENTS }, (_, i) => FakeAgent.connect(target.wsUrl, target.agentToken, { agentId: `side-${target.name}-${i}`, labels: [LABEL], maxConcurrency: 2, onDispatch })));
}

async function push(target: Target, n: number): Promise<number> {
  const body = JSON.stringify({ ref: 'refs/heads/main', before: '0'.repeat(40), after: target.sha, deleted: false, commits: [], repository: { full_name: target.repository, default_branch: 'main' }, sender: { id: 1, login: 'bench' } });
  const deliveryId = `side-${Date.now()}-${n}`;
  const { webhook } = target;
  const [path, headers] =
    webhook.kind === 'generic'
      ? [webhook.path, { 'content-type': 'application/json', 'x-event-type': 'push', 'x-delivery-id': deliveryId }]
      : ['/webhooks/github', { 'content-type': 'application/json', 'x-github-event': 'push', 'x-github-delivery': deliveryId, 'x-hub-signature-256': await sign(target.secret, body) }];
  const started = performance.now();
  const res = await httpPost(`${target.httpUrl}${path}`, body, headers);
  if (res.status >= 300) throw new Error(`${target.name} answered the webhook ${res.status}`);
  return performance.now() - started;
}

/** The dispatches that arrive after `since`, once there are `count` of them (30 s at most). */
async function arrivalsAfter(arrivals: number[], since: number, count: number): Promise<number[]> {
  const until = performance.now() + 30_000;
  for (;;) {
    const seen = arrivals.filter((at) => at >= since);
    if (seen.length >= count) return seen.slice(0, count).map((at) => at - since);
    if (performance.now() > until) throw new Error(`only ${seen.length} of ${count} dispatches arrived within 30 s`);
    await new Promise((resolve) => setTimeout(resolve, 1));
  }
}

async function measure(target: Target): Promise<TargetFigures> {
  const arrivals: number[] = [];
  const agents = await connectAgents(target, arrivals);
  try {
    const accept: number[] = [];
    const toDispatch: number[] = [];
    let stagesBefore: StageSample = new Map();
    for (let i = 0; i < SEQUENTIAL + 5; i++) {
      if (i === 5 && target.metrics) stagesBefore = sampleStages(await target.metrics());
      const started = performance.now();
      const accepted = await push(target, i);
      const [arrived = NaN] = await arrivalsAfter(arrivals, started, 1);
      if (i >= 5) [accept[i - 5], toDispatch[i - 5]] = [accepted, arrived];
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    const budget = target.metrics ? stageBudget(stagesBefore, sampleStages(await target.metrics())) : undefined;
    const rounds: number[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      const started = performance.now();
      await Promise.all(Array.from({ length: ROUND_SIZE }, (_, i) => push(target, 10_000 + round * ROUND_SIZE + i)));
      rounds.push(...(await arrivalsAfter(arrivals, started, ROUND_SIZE)));
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const floor = target.databaseUrl ? await durabilityFloor(target.databaseUrl) : undefined;
    return { acceptMs: percentiles(accept), webhookToDispatchMs: percentiles(toDispatch), roundOf10ToDispatchMs: percentiles(rounds), ...(budget && { budget }), ...(floor && { floor }) };
  } finally {
    await Promise.all(agents.map((agent) => agent.close()));
  }
}

function report(results: Record<string, TargetFigures>): { ratios: Record<string, number>; inBareCommits: Record<string, Record<string, number>> } {
  const [ours, other] = [results.switchyard, results.other];
  const unit = ours?.floor?.bareCommitMs.p50 ?? NaN;
  console.log(`\nside by side: ${SEQUENTIAL} deliveries one at a time, ${ROUNDS} rounds of ${ROUND_SIZE} (ms; "commits": p50 in bare durable commits of ${unit} ms)\n`);
  console.log(`${'target'.padEnd(11)} ${'measure'.padEnd(26)} ${'p50'.padStart(8)} ${'p95'.padStart(8)} ${'p99'.padStart(8)} ${'commits'.padStart(8)}`);
  const ratios: Record<string, number> = {};
  const inBareCommits: Record<string, Record<string, number>> = {};
  for (const [name, figures] of Object.entries(results)) {
    for (const measure of MEASURES) {
      const v = figures[measure];
      (inBareCommits[name] ??= {})[measure] = ratio(v.p50, unit);
      console.log(`${name.padEnd(11)} ${measure.padEnd(26)} ${String(v.p50).padStart(8)} ${String(v.p95).padStart(8)} ${String(v.p99).padStart(8)} ${String(ratio(v.p50, unit)).padStart(8)}`);
      if (name === 'other' && ours && other) ratios[measure] = ratio(other[measure].p50, ours[measure].p50);
    }
  }
  if (ours?.floor) console.log(`\nsame Postgres, same run: bare durable commit p50 ${ours.floor.bareCommitMs.p50} ms (p95 ${ours.floor.bareCommitMs.p95}), round trip p50 ${ours.floor.roundTripMs.p50} ms`);
  if (Object.keys(ratios).length > 0) console.log(`other / switchyard at p50 (above 1: Switchyard is faster): ${JSON.stringify(ratios)}`);
  if (ours?.budget) printBudget(ours.budget, unit);
  return { ratios, inBareCommits };
}

async function main(): Promise<void> {
  const against = arg('--against');
  const targets: (() => Promise<Target>)[] = [() => startSwitchyard('switchyard')];
  if (against) targets.push(() => Promise.resolve(externalTarget(against)));
  else if (argv.includes('--against-self')) targets.push(() => startSwitchyard('other'));
  const results: Record<string, TargetFigures> = {};
  for (const start of targets) {
    const target = await start();
    try {
      results[target.name] = await measure(target);
    } finally {
      await target.stop();
    }
  }
  const { ratios, inBareCommits } = report(results);
  const againstName = against ?? (argv.includes('--against-self') ? 'self' : null);
  console.log(`results: ${(await writeResult('side-by-side', flags, { against: againstName, ...results, ratios, inBareCommits })).pathname}`);
}

await main();
process.exit(0);
