/**
 * What every benchmark shares: its flags, a fresh database on the external Postgres, percentiles,
 * the machine it ran on, and one JSON file per benchmark in bench/results/ (read by bench/run.ts).
 */
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { Agent, request } from 'node:http';
import { mkdir, writeFile } from 'node:fs/promises';
import { cpus, loadavg, totalmem } from 'node:os';
import pg from 'pg';
import { forEachConcurrently } from '../lib/concurrently.ts';

export interface BenchFlags {
  /** `--quick`: small sizes, a smoke run of the whole suite in a minute or two. */
  quick: boolean;
  /** `--commit-batching off`: the same load with group commit off (SWITCHYARD_COMMIT_BATCHING). */
  commitBatching: 'on' | 'off';
  /** `--one-thread`: a bench that starts its coordinator in process keeps it on the thread of its agents and client (bench/coordinator-thread.ts). */
  oneThread: boolean;
}

export function benchFlags(argv: string[] = process.argv.slice(2)): BenchFlags {
  const at = argv.indexOf('--commit-batching');
  const batching = at >= 0 ? argv[at + 1] : 'on';
  if (batching !== 'on' && batching !== 'off') throw new Error(`--commit-batching takes on or off, got ${String(batching)}`);
  return { quick: argv.includes('--quick'), commitBatching: batching, oneThread: argv.includes('--one-thread') };
}

export const RESULTS_DIR = new URL('results/', import.meta.url);

/** `results/<name>.json`, or `results/<name>.batching-off.json` for the comparison run. */
export function resultFile(name: string, commitBatching: 'on' | 'off'): URL {
  return new URL(commitBatching === 'on' ? `${name}.json` : `${name}.batching-off.json`, RESULTS_DIR);
}

export interface Environment {
  node: string;
  cpus: number;
  cpuModel: string;
  memoryGiB: number;
  loadAverage: number[];
  date: string;
  gitCommit: string;
  /** Tracked files changed in the work tree when the figures were taken (others may be editing it). */
  gitDirtyFiles: number;
}

export function environment(): Environment {
  const git = (...args: string[]) => {
    try {
      return execFileSync('git', args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
    } catch {
      return 'unknown'; // not a git checkout: the figures still stand, only unattributed
    }
  };
  const dirty = git('status', '--porcelain', '--untracked-files=no');
  return {
    node: process.version,
    cpus: cpus().length,
    cpuModel: cpus()[0]?.model ?? 'unknown',
    memoryGiB: Math.round(totalmem() / 2 ** 30),
    loadAverage: loadavg().map((l) => Math.round(l * 100) / 100),
    date: new Date().toISOString(),
    gitCommit: git('rev-parse', 'HEAD'),
    gitDirtyFiles: dirty === '' || dirty === 'unknown' ? 0 : dirty.split('\n').length,
  };
}

export async function writeResult(name: string, flags: BenchFlags, results: object): Promise<URL> {
  await mkdir(RESULTS_DIR, { recursive: true });
  const file = resultFile(name, flags.commitBatching);
  const body = { bench: name, at: new Date().toISOString(), ...flags, environment: environment(), results };
  await writeFile(file, `${JSON.stringify(body, null, 2)}\n`);
  return file;
}

const admin = {
  host: process.env.PGHOST ?? '127.0.0.1',
  port: Number(process.env.PGPORT ?? 5432),
  user: process.env.PGUSER ?? 'postgres',
  password: process.env.PGPASSWORD,
};

/** A new, empty database on the external Postgres; `drop` removes it (forcing out open sessions). */
export async function freshDatabase(prefix: string): Promise<{ url: string; drop: () => Promise<void> }> {
  const name = `sy_bench_${prefix}_${randomBytes(4).toString('hex')}`;
  const client = new pg.Client({ ...admin, database: 'postgres' });
  await client.connect();
  await client.query(`CREATE DATABASE "${name}"`);
  const password = admin.password === undefined ? '' : `:${encodeURIComponent(admin.password)}`;
  return {
    url: `postgres://${encodeURIComponent(admin.user)}${password}@${admin.host}:${admin.port}/${name}`,
    drop: async () => {
      await client.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
      await client.end();
    },
  };
}

export interface Percentiles {
  n: number;
  p50: number;
  p95: number;
  p99: number;
  max: number;
}

export function percentiles(samples: number[]): Percentiles {
  const sorted = [...samples].sort((a, b) => a - b);
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? NaN;
  const round = (v: number) => Math.round(v * 100) / 100;
  return { n: sorted.length, p50: round(at(0.5)), p95: round(at(0.95)), p99: round(at(0.99)), max: round(sorted.at(-1) ?? NaN) };
}

/** Runs `count` tasks with at most `width` in flight. */
export async function pool(count: number, width: number, task: (i: number) => Promise<void>): Promise<void> {
  await forEachConcurrently(Array.from({ length: count }, (_, i) => i), width, task);
}

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Kept-alive sockets, as many as requests in flight: a burst's later requests do not queue for a socket. */
const keptAlive = new Agent({ keepAlive: true, maxSockets: Infinity });

/**
 * POSTs `body` with node:http on kept-alive sockets and reads the answer. Not `fetch`: undici's own
 * work before a request reaches its socket is 0.3–0.6 ms a request, so 100 requests sent at once
 * reached a bare server 40–60 ms after the first was asked for (10–20 ms with this), and benchmarks
 * timed the client as much as the orchestrator.
 */
export function httpPost(url: string, body: string, headers: Record<string, string>): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const sent = request(url, { method: 'POST', agent: keptAlive, headers: { ...headers, 'content-length': String(Buffer.byteLength(body)) } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', reject);
    });
    sent.on('error', reject);
    sent.end(body);
  });
}


export interface DurabilityFloor {
  /** One single-row INSERT committed on its own (fsync'd WAL), one at a time: the unit the path is counted in. */
  bareCommitMs: Percentiles;
  /** `SELECT 1`: one round trip to the database, nothing written. */
  roundTripMs: Percentiles;
}

/**
 * The floor a durable system stands on, measured on `url` (the database the figures beside it were
 * taken on): a bare single-row commit and a bare round trip, `count` of each, one at a time.
 */
export async function durabilityFloor(url: string, count = 300): Promise<DurabilityFloor> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query('CREATE TABLE IF NOT EXISTS bench_bare_commit (id bigserial PRIMARY KEY, at timestamptz NOT NULL DEFAULT now(), note text NOT NULL)');
    const timed = async (sql: string, values: unknown[]) => {
      const samples: number[] = [];
      for (let i = 0; i < count + 20; i++) {
        const started = performance.now();
        await client.query(sql, values);
        if (i >= 20) samples.push(performance.now() - started);
      }
      return percentiles(samples);
    };
    const bareCommitMs = await timed('INSERT INTO bench_bare_commit (note) VALUES ($1)', ['bare']);
    const roundTripMs = await timed('SELECT 1', []);
    await client.query('DROP TABLE bench_bare_commit');
    return { bareCommitMs, roundTripMs };
  } finally {
    await client.end();
  }
}

/** `value` in units of `unit`, two decimals. */
export function ratio(value: number, unit: number): number {
  return Math.round((value / unit) * 100) / 100;
}
