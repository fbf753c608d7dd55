/**
 * The smoke leg `.ci/run` runs on a second Node line, in a fresh install: `npm start` on the embedded
 * default, one signed push whose job takes its environment from an inline expression (evaluated in
 * isolated-vm) and runs on an agent the bare-metal scaler starts, green; then Ctrl-C, and no
 * process left. Run it with the Node under test first on PATH: `node --import tsx test/smoke/start-and-run.ts`.
 */
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { createHmac } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { findFreePort } from '../../src/db/free-port.ts';
import { eventually } from '../support/runtime.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const SECRET = 'smoke-secret';

const LOCK_FILE = {
  schemaVersion: 29,
  source: { file: '.kici/workflows/ci.ts', export: '#default' },
  contentHash: '0'.repeat(64),
  workflows: [
    {
      name: 'smoke',
      source: { file: '.kici/workflows/ci.ts', export: '#default' },
      contentHash: '',
      compileSchemaVersion: 0,
      triggers: [{ _type: 'push', branches: [{ type: 'glob', pattern: 'main' }], paths: [] }],
      jobs: [
        {
          _type: 'static',
          name: 'build',
          runsOn: [{ kind: 'exact', value: 'kici:os:linux' }],
          needs: [],
          env: { _type: 'inline', expression: '(event) => ({ ANSWER: String(6 * 7), EVENT: typeof event })' },
          steps: [{ name: 'hello', hasOutputs: false, run: 'echo "answer $ANSWER on node $(node --version)"' }],
        },
      ],
    },
  ],
};

async function repositoryWithLockFile(): Promise<{ path: string; sha: string }> {
  const path = await mkdtemp(join(tmpdir(), 'sy-smoke-repo-'));
  const git = (...args: string[]) => execFileSync('git', ['-C', path, '-c', 'user.name=smoke', '-c', 'user.email=smoke@example.com', ...args], { encoding: 'utf8' }).trim();
  git('init', '-q', '-b', 'main');
  await mkdir(join(path, '.kici'));
  await writeFile(join(path, '.kici/kici.lock.json'), JSON.stringify(LOCK_FILE));
  git('add', '-A');
  git('commit', '-qm', 'add CI');
  return { path, sha: git('rev-parse', 'HEAD') };
}

function pushPayload(sha: string): string {
  return JSON.stringify({
    ref: 'refs/heads/main',
    before: '0'.repeat(40),
    after: sha,
    commits: [],
    repository: { id: 1, name: 'smoke', full_name: 'acme/smoke', default_branch: 'main', private: false, owner: { login: 'acme', id: 1 } },
    sender: { login: 'smoke', id: 2 },
    pusher: { name: 'smoke' },
  });
}

/** Whether any process of the group `pgid` is still running. */
function groupAlive(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
    return true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ESRCH') return false;
    throw error;
  }
}

async function main(): Promise<void> {
  const started = performance.now();
  const seconds = () => ((performance.now() - started) / 1000).toFixed(1);
  const dataDir = await mkdtemp(join(tmpdir(), 'sy-smoke-data-'));
  const repo = await repositoryWithLockFile();
  const port = await findFreePort();
  const url = `http://127.0.0.1:${port}`;
  const child = spawn('npm', ['start'], {
    cwd: ROOT,
    env: { ...process.env, PORT: String(port), SWITCHYARD_DATA_DIR: dataDir, GITHUB_WEBHOOK_SECRET: SECRET, LOG_FORMAT: 'json' },
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  try {
    await eventually(async () => (await fetch(`${url}/readyz`).catch(() => null))?.ok, 60_000, 'npm start to be ready');
    console.log(`smoke: ready after ${seconds()} s on Node ${process.version}`);
    const token = (await readFile(join(dataDir, 'admin-token'), 'utf8')).trim();
    const api = (path: string, init: RequestInit = {}, accept = 'application/json') =>
      fetch(`${url}${path}`, { ...init, headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept } });
    const registered = await api('/api/v1/repositories', { method: 'POST', body: JSON.stringify({ name: 'acme/smoke', provider: 'local', path: repo.path }) });
    assert.ok(registered.ok, `registering the repository: ${registered.status} ${await registered.text()}`);
    const body = pushPayload(repo.sha);
    const signature = `sha256=${createHmac('sha256', SECRET).update(body).digest('hex')}`;
    const headers = { 'content-type': 'application/json', 'x-github-event': 'push', 'x-github-delivery': `smoke-${repo.sha}`, 'x-hub-signature-256': signature };
    const delivered = await fetch(`${url}/webhooks/github`, { method: 'POST', headers, body });
    assert.equal(delivered.status, 202, await delivered.text());
    const run = await eventually(async () => {
      const { runs } = (await (await api('/api/v1/runs')).json()) as { runs: { run_id: string; status: string }[] };
      const [first] = runs;
      return first !== undefined && ['success', 'failed', 'cancelled'].includes(first.status) ? first : null;
    }, 120_000, 'the run to end');
    const logs = await (await api(`/api/v1/runs/${run.run_id}/logs?job=build`, {}, 'text/plain')).text();
    assert.equal(run.status, 'success', `the run ended ${run.status}; its log:\n${logs}`);
    assert.match(logs, new RegExp(`answer 42 on node ${process.version.replace(/\./g, '\\.')}`), 'the inline env was evaluated, and the agent runs on this Node');
    console.log(`smoke: run green after ${seconds()} s: ${logs.trim().split('\n').at(-1) ?? ''}`);
  } catch (error) {
    console.error(`--- coordinator output ---\n${output.slice(-6000)}`);
    throw error;
  } finally {
    if (child.pid !== undefined && child.exitCode === null) process.kill(-child.pid, 'SIGINT'); // Ctrl-C: the whole group
  }
  const code = await exited;
  await eventually(() => !groupAlive(child.pid ?? 0), 60_000, 'every process of npm start (the coordinator, its Postgres, its agents) to stop after Ctrl-C').catch((error: unknown) => {
    throw new Error(`${String(error)}\n${output.slice(-3000)}`);
  });
  assert.equal(existsSync(join(dataDir, 'postgres', 'postmaster.pid')), false, 'the embedded Postgres stopped');
  console.log(`smoke: stopped after ${seconds()} s (npm exit ${String(code)}), no process left`);
  await rm(dataDir, { recursive: true, force: true });
  await rm(repo.path, { recursive: true, force: true });
}

await main();
