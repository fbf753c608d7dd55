/**
 * The burst of issue 13, shared by test/e2e/burst.test.ts and bench/burst.bench.ts (no node:test
 * import here): many signed pushes, one short `run:` job each, against one reference agent process.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { isTerminalRunStatus } from '../../machines/status.ts';
import { createLockRepo, lockFileWith, pushWorkflow, runJob } from './lock-repo.ts';
import { githubHeaders, pushPayload } from './webhooks.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
export const BURST_WORKFLOW = 'burst';

/** A repository whose lock file runs one short `run:` job on every push to main. */
export async function burstRepository() {
  const repo = await createLockRepo();
  const job = runJob('build', ['echo "building $GITHUB_SHA"', 'test -f README']);
  const sha = repo.commit({ '.kici/kici.lock.json': lockFileWith([pushWorkflow(BURST_WORKFLOW, [job])]), README: 'burst' });
  return { repo, sha };
}

export interface ReferenceAgent {
  child: ChildProcess;
  /** Everything the agent wrote (pino JSON lines on stderr). */
  output(): string;
  /** The close codes the agent saw, from its own "disconnected; reconnecting" log lines. */
  closeCodes(): number[];
  /** `rate.limit.warning` frames the agent received (it logs each one). */
  rateLimitWarnings(): number;
  stop(): Promise<void>;
}

/** `switchyard agent` as a child process, as a user starts it. */
export async function startReferenceAgent(args: { wsUrl: string; token: string; agentId: string; maxConcurrency: number }): Promise<ReferenceAgent> {
  const workDir = await mkdtemp(join(tmpdir(), 'sy-burst-agent-'));
  const argv = ['--no-node-snapshot', '--import', 'tsx', 'src/cli/main.ts', 'agent', '--url', args.wsUrl, '--token', args.token];
  argv.push('--labels', 'linux', '--agent-id', args.agentId, '--max-concurrency', String(args.maxConcurrency), '--work-dir', workDir);
  const child = spawn(process.execPath, argv, { cwd: ROOT, stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, LOG_LEVEL: 'info' } });
  let output = '';
  child.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const closeCodes = () =>
    output
      .split('\n')
      .filter((line) => line.includes('disconnected; reconnecting'))
      .map((line) => Number((JSON.parse(line) as { code?: unknown }).code));
  const rateLimitWarnings = () => output.split('\n').filter((line) => line.includes('"rate.limit.warning"')).length;
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
    await exited;
    await rm(workDir, { recursive: true, force: true });
  };
  return { child, output: () => output, closeCodes, rateLimitWarnings, stop };
}

/** Posts `count` signed push deliveries for `sha`, at most `width` at a time; each must be accepted. */
export async function postPushes(args: { url: string; secret: string; sha: string; count: number; width: number; prefix: string }): Promise<void> {
  let next = 0;
  const one = async (i: number) => {
    const body = JSON.stringify(pushPayload(args.sha));
    const deliveryId = `${args.prefix}-${i}`;
    const res = await fetch(`${args.url}/webhooks/github`, { method: 'POST', body, headers: await githubHeaders(args.secret, body, deliveryId) });
    if (res.status !== 202) throw new Error(`delivery ${deliveryId} answered ${res.status}: ${await res.text()}`);
  };
  await Promise.all(
    Array.from({ length: args.width }, async () => {
      while (next < args.count) await one(next++);
    }),
  );
}

export interface BurstOutcome {
  /** Runs per status. */
  statuses: Record<string, number>;
  runs: number;
  terminal: number;
  /** ms from the first delivery to the last run reaching a terminal status (server clock). */
  elapsedMs: number;
  /** Outcomes of the jobs that did not succeed (at most 20), for the failure message. */
  failures: { run_id: string; status: string; outcome: string | null }[];
}

/**
 * Waits until `count` runs of the burst workflow are terminal. There is no overall deadline, only
 * a stall bound: it gives up when nothing finished for `stallMs`, however loaded the machine.
 */
export async function awaitBurst(databaseUrl: string, count: number, stallMs: number, progress: (line: string) => void = () => undefined): Promise<BurstOutcome> {
  const db = new pg.Client({ connectionString: databaseUrl });
  await db.connect();
  try {
    let last = -1;
    let lastProgressAt = Date.now();
    for (;;) {
      const outcome = await readBurst(db);
      if (outcome.terminal !== last) {
        last = outcome.terminal;
        lastProgressAt = Date.now();
        progress(`${outcome.terminal}/${count} runs terminal ${JSON.stringify(outcome.statuses)}`);
      }
      if (outcome.terminal >= count) return outcome;
      if (Date.now() - lastProgressAt > stallMs) return outcome;
      await new Promise((resolve) => setTimeout(resolve, 1000));
    }
  } finally {
    await db.end();
  }
}

async function readBurst(db: pg.Client): Promise<BurstOutcome> {
  const { rows } = await db.query<{ status: string; n: string }>('select status, count(*) as n from runs where workflow_name = $1 group by status', [BURST_WORKFLOW]);
  const statuses = Object.fromEntries(rows.map((r) => [r.status, Number(r.n)]));
  const runs = rows.reduce((sum, r) => sum + Number(r.n), 0);
  const terminal = rows.filter((r) => isTerminalRunStatus(r.status)).reduce((sum, r) => sum + Number(r.n), 0);
  const span = await db.query<{ elapsed: string | null }>(
    'select (select max(updated_at) from runs where workflow_name = $1) - (select min(received_at) from deliveries) as elapsed',
    [BURST_WORKFLOW],
  );
  const failures = await db.query<{ run_id: string; status: string; outcome: string | null }>(
    "select run_id, status, outcome from jobs where run_id in (select run_id from runs where workflow_name = $1) and status <> 'success' limit 20",
    [BURST_WORKFLOW],
  );
  return { statuses, runs, terminal, elapsedMs: Number(span.rows[0]?.elapsed ?? 0), failures: failures.rows };
}
