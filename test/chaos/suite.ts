import { randomBytes } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { pino } from 'pino';
import { connectDatabase } from '../../src/db/database.ts';
import { findRestartablePort } from '../support/ports.ts';
import { dropDatabase } from '../support/fake-agent.ts';
import { createLockRepo, lockFileWith, pushWorkflow, runJob } from '../support/lock-repo.ts';
import { ChaosAgent, type AgentBehaviour } from './agent.ts';
import { ChaosCoordinator } from './cluster.ts';
import { FaultInjector, sleep } from './faults.ts';
import * as check from './invariants.ts';
import { AttemptLedger } from './ledger.ts';
import { WebhookLoad } from './load.ts';
import { Rng } from './rng.ts';
import type { ChaosReport } from './report.ts';

export interface ChaosOptions {
  seed: number;
  durationMs: number;
  agents: number;
  /** New deliveries per second (each sent one to three times). */
  deliveriesPerSecond: number;
  /** Mean time between faults. */
  faultEveryMs: number;
  /** How long the cluster gets, after the faults stop, for every run to end. */
  settleTimeoutMs: number;
  /** Agents that know only coordinator B: they serve runs owned by A through B (shared agents). @default 0 */
  pinnedAgents?: number;
  /** Deliveries sent at once halfway through the faults, on top of the steady load. @default 0 */
  burst?: number;
  log?: (line: string) => void;
}

const SECRET = 'chaos-webhook-secret';
const ADMIN_TOKEN = `sya_chaos_${randomBytes(6).toString('hex')}`;
const WORKFLOW = 'chaos';
const RECOVERY_WINDOW_MS = 6000;
const BEHAVIOUR: AgentBehaviour = { dropAck: 0.03, dropAckOf: 4, fail: 0.05, jobMs: [50, 900] };

/** Timeouts short enough that every fault resolves within seconds (defaults are minutes). */
function coordinatorEnv(databaseUrl: string): Record<string, string> {
  return {
    DATABASE_URL: databaseUrl,
    SWITCHYARD_ADMIN_TOKEN: ADMIN_TOKEN,
    GITHUB_WEBHOOK_SECRET: SECRET,
    SWITCHYARD_AGENT_AUTH: 'none',
    SWITCHYARD_LEASE_RENEW_MS: '250',
    SWITCHYARD_LEASE_TTL_MS: '1500',
    SWITCHYARD_DISPATCH_ACK_TIMEOUT_MS: '1500',
    SWITCHYARD_JOB_HEARTBEAT_INTERVAL_MS: '1000',
    SWITCHYARD_STALE_MULTIPLIER: '8',
    SWITCHYARD_RECOVERY_WINDOW_MS: String(RECOVERY_WINDOW_MS),
    SWITCHYARD_MAX_DISPATCH_ATTEMPTS: '8',
    SWITCHYARD_SCALERS: 'none',
    LOG_LEVEL: process.env.CHAOS_LOG_LEVEL ?? 'info',
  };
}

async function freshDatabase(): Promise<string> {
  const name = `sy_chaos_${process.pid}_${randomBytes(3).toString('hex')}`;
  const admin = new pg.Client({ host: '127.0.0.1', port: 5432, user: process.env.PGUSER ?? 'postgres', database: 'postgres' });
  await admin.connect();
  await admin.query(`CREATE DATABASE "${name}"`);
  await admin.end();
  return `postgres://${encodeURIComponent(process.env.PGUSER ?? 'postgres')}@127.0.0.1:5432/${name}`;
}

/**
 * Two coordinators on one Postgres, `agents` agents, webhook deliveries with duplicates and
 * reordering, and one random fault every ~`faultEveryMs` for `durationMs`; then the faults stop,
 * the cluster settles, and the invariants are checked against the database and the agents' ledger.
 */
export async function runChaos(options: ChaosOptions): Promise<ChaosReport> {
  const rng = new Rng(options.seed);
  const logDir = await mkdtemp(join(tmpdir(), 'sy-chaos-'));
  // What the harness saw (faults, and each agent's dispatches, cancels, disconnects and registers),
  // stamped with the clock the coordinators' logs use, so a failure can be read against them.
  const harnessLog = createWriteStream(join(logDir, 'harness.log'), { flags: 'a' });
  const log = (line: string) => {
    harnessLog.write(`${Date.now()} ${line}\n`);
    options.log?.(line);
  };
  const databaseUrl = await freshDatabase();
  const repo = await createLockRepo();
  const sha = repo.commit({ '.kici/kici.lock.json': lockFileWith([pushWorkflow(WORKFLOW, [runJob('build', ['make']), runJob('test', ['make test'], { needs: ['build'] })])]) });
  const env = coordinatorEnv(databaseUrl);
  // Restarted on the same port after each kill: a port no outgoing connection can be given meanwhile.
  const coordinators = [new ChaosCoordinator('coord-a', await findRestartablePort(), env, logDir), new ChaosCoordinator('coord-b', await findRestartablePort(), env, logDir)];
  const ledger = new AttemptLedger();
  const agents: ChaosAgent[] = [];
  const homes = new Map<ChaosAgent, number>();
  const started = performance.now();
  // A run whose invariants all held leaves nothing behind; one that broke one keeps its database beside its logs.
  let clean = false;
  try {
    for (const c of coordinators) if (!(await c.start())) throw new Error(`${c.id} did not start; see ${logDir}`);
    await registerRepository(coordinators[0] as ChaosCoordinator, repo.path);
    const pinned = new Set<ChaosAgent>();
    const spawnAgent = (home: number, pinnedToB = false) => {
      const order = pinnedToB ? [coordinators[1] as ChaosCoordinator] : [coordinators[home % 2] as ChaosCoordinator, coordinators[(home + 1) % 2] as ChaosCoordinator];
      const urls = () => order.map((c) => c.wsUrl);
      const agent = new ChaosAgent(`chaos-agent-${agents.length}${pinnedToB ? '-b-only' : ''}`, urls, ledger, rng, BEHAVIOUR, log);
      if (pinnedToB) pinned.add(agent);
      homes.set(agent, home);
      agents.push(agent);
      void agent.start();
      return agent;
    };
    for (let i = 0; i < options.agents; i++) spawnAgent(i, i < (options.pinnedAgents ?? 0));
    const faults = new FaultInjector(
      {
        coordinators,
        agents: () => agents,
        replaceAgent: (dead) => void spawnAgent(homes.get(dead) ?? 0, pinned.has(dead)),
        databaseUrl,
        recoveryWindowMs: RECOVERY_WINDOW_MS,
      },
      rng,
      log,
    );
    const load = new WebhookLoad(coordinators, SECRET, sha, rng);
    await chaosPhase(options, rng, load, faults);
    log('faults stopped; settling');
    await faults.stopAndSettle();
    for (const agent of agents) agent.goHome();
    await load.drain();
    const settled = await settle(databaseUrl, load, ledger, options.settleTimeoutMs, log);
    const database = connectDatabase({ connectionString: databaseUrl }, 'external', pino({ level: 'silent' }));
    try {
      const accepted = [...load.deliveries.values()].filter((d) => d.acceptedBy !== null);
      const invariants = [
        await check.deliveriesProcessedOnce(database.db, accepted, WORKFLOW),
        await check.everyRunFinal(database.db),
        check.noDoubleDispatch(ledger),
        await check.noRunWithTwoOwners(database.db),
        await check.journalsReplayExactly(database.db),
        noCrash(coordinators),
      ];
      clean = invariants.every((invariant) => invariant.ok);
      return {
        seed: options.seed,
        durationMs: options.durationMs,
        pinnedAgents: options.pinnedAgents ?? 0,
        burst: options.burst ?? 0,
        elapsedMs: Math.round(performance.now() - started),
        settleMs: settled,
        agents: options.agents,
        deliveries: load.deliveries.size,
        sends: [...load.deliveries.values()].reduce((n, d) => n + d.sends, 0),
        unaccepted: load.unaccepted().length,
        faults: { ...Object.fromEntries(faults.counts), 'job.ack lost': ledger.lostAcks },
        garbageCloseCodes: Object.fromEntries(faults.garbageCloseCodes),
        fencedExits: coordinators.reduce((n, c) => n + c.fencedExits, 0),
        attempts: ledger.size,
        runStatuses: await countBy(database, 'runs'),
        jobOutcomes: await failedJobOutcomes(database),
        invariants,
        logDir,
        databaseUrl,
      };
    } finally {
      await database.close();
    }
  } finally {
    for (const agent of agents) agent.kill();
    for (const c of coordinators) await c.shutdown();
    // A drop that fails leaves a database behind; it does not turn a run whose invariants held into an error.
    if (clean) await dropDatabase(databaseUrl).catch((error: unknown) => log(`dropping ${databaseUrl} failed: ${String(error)}`));
    harnessLog.end();
  }
}

async function chaosPhase(options: ChaosOptions, rng: Rng, load: WebhookLoad, faults: FaultInjector): Promise<void> {
  faults.startKeeper();
  const until = performance.now() + options.durationMs;
  let nextFault = performance.now() + rng.int(options.faultEveryMs / 2, options.faultEveryMs * 1.5);
  const tickMs = 100;
  let owed = 0;
  let burstAt: number | null = performance.now() + options.durationMs / 2;
  while (performance.now() < until) {
    if (burstAt !== null && performance.now() >= burstAt) {
      load.burst(options.burst ?? 0);
      burstAt = null;
    }
    owed += (options.deliveriesPerSecond * tickMs) / 1000;
    const count = Math.floor(owed);
    owed -= count;
    load.burst(count);
    if (performance.now() >= nextFault) {
      faults.inject();
      nextFault = performance.now() + rng.int(options.faultEveryMs / 2, options.faultEveryMs * 1.5);
    }
    await sleep(tickMs);
  }
}

/** Waits until every accepted delivery is processed and every run and job is final; returns the time it took. */
async function settle(databaseUrl: string, load: WebhookLoad, ledger: AttemptLedger, timeoutMs: number, log: (line: string) => void): Promise<number> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  const started = performance.now();
  let lastLog = 0;
  try {
    while (performance.now() - started < timeoutMs) {
      const { rows } = await client.query<{ deliveries: string; runs: string; timers: string; total: string }>(`
        SELECT (SELECT count(*) FROM deliveries WHERE status <> 'processed') AS deliveries,
               (SELECT count(*) FROM runs WHERE status NOT IN ('success', 'failed', 'cancelled')) AS runs,
               (SELECT count(*) FROM timers) AS timers,
               (SELECT count(*) FROM runs) AS total`);
      const pending = rows[0];
      const accepted = [...load.deliveries.values()].filter((d) => d.acceptedBy !== null).length;
      const done = pending && Number(pending.deliveries) + Number(pending.runs) + Number(pending.timers) === 0 && Number(pending.total) === accepted;
      if (done && ledger.open().length === 0) break;
      if (performance.now() - lastLog > 2000) {
        lastLog = performance.now();
        log(`settling: deliveries pending ${pending?.deliveries}, runs open ${pending?.runs}, timers ${pending?.timers}, attempts held ${ledger.open().length}`);
      }
      await sleep(250);
    }
    return Math.round(performance.now() - started);
  } finally {
    await client.end();
  }
}

function noCrash(coordinators: readonly ChaosCoordinator[]): check.InvariantResult {
  const exits = coordinators.flatMap((c) => c.unexpectedExits);
  return {
    name: 'no coordinator crashed (exits only when killed or fenced)',
    ok: exits.length === 0,
    checked: `${coordinators.length} coordinators`,
    violations: exits.map((e) => `${e.coordinatorId} exited with ${e.code ?? e.signal}: …${e.tail.slice(-600)}`),
  };
}

async function registerRepository(coordinator: ChaosCoordinator, path: string): Promise<void> {
  const res = await fetch(`${coordinator.url}/api/v1/repositories`, {
    method: 'POST',
    headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify({ name: 'acme/app', provider: 'local', path }),
  });
  if (res.status !== 201) throw new Error(`registering the repository: ${res.status} ${await res.text()}`);
}

/** Why the jobs that did not succeed ended, as users would read it. */
async function failedJobOutcomes(database: ReturnType<typeof connectDatabase>): Promise<Record<string, number>> {
  const rows = await database.db.selectFrom('jobs').select(['status', 'outcome']).where('status', '<>', 'success').execute();
  const counts: Record<string, number> = {};
  for (const { status, outcome } of rows) {
    const key = `${status}: ${outcome ?? '—'}`;
    counts[key] = (counts[key] ?? 0) + 1;
  }
  return counts;
}

async function countBy(database: ReturnType<typeof connectDatabase>, table: 'runs'): Promise<Record<string, number>> {
  const rows = await database.db.selectFrom(table).select('status').execute();
  const counts: Record<string, number> = {};
  for (const { status } of rows) counts[status] = (counts[status] ?? 0) + 1;
  return counts;
}


