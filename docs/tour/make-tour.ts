/**
 * Makes the screenshots of docs/tour.md: starts Switchyard as `npm start` does (the embedded
 * default, the bare-metal scaler) in a data dir of its own, runs a small pipeline twice (green,
 * then with a failing test), and photographs the runs list, a run and the visualizer in Debian's
 * Chromium at 1400×900. Anyone can re-run it: `npm run tour` (or `-- --out DIR`).
 */
import { execFileSync, spawn } from 'node:child_process';
import { createHmac } from 'node:crypto';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { chromium, type Page } from 'playwright-core';
import { findFreePort } from '../../src/db/free-port.ts';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const CHROMIUM = '/usr/bin/chromium';
export const TOUR_SHOTS = ['1-runs-list.png', '2-run.png', '3-visualizer.png'] as const;

const step = (name: string, run: string) => ({ name, hasOutputs: false, run });

/** lint → test → deploy; `failing` makes the test step exit 1, so deploy is skipped. */
function pipeline(failing: boolean) {
  const job = (name: string, needs: string[], steps: object[]) => ({ _type: 'static', name, needs, steps });
  return {
    name: 'ci',
    jobs: [
      job('lint', [], [step('eslint', 'echo "0 problems"')]),
      job('test', ['lint'], [step('unit', 'for i in 1 2 3; do echo "suite $i passed"; sleep 0.3; done'), step('integration', failing ? 'echo "expected 200, got 503"; exit 1' : 'echo "12 passed"')]),
      job('deploy', ['test'], [step('ship', 'echo "deployed build $RANDOM"')]),
    ],
  };
}

const SECRET = 'tour-secret';

/** A local repository whose lock file runs the pipeline on a push to main, and its commit. */
async function repository(dir: string): Promise<{ path: string; sha: string }> {
  const path = join(dir, 'app');
  await mkdir(join(path, '.kici'), { recursive: true });
  const workflow = { ...pipeline(false), source: { file: '.kici/workflows/ci.ts', export: '#default' }, contentHash: '', compileSchemaVersion: 0, triggers: [{ _type: 'push', branches: [{ type: 'glob', pattern: 'main' }], paths: [] }] };
  const lock = { schemaVersion: 29, source: workflow.source, contentHash: '0'.repeat(64), workflows: [workflow] };
  const git = (...args: string[]) => execFileSync('git', ['-C', path, '-c', 'user.name=Ada', '-c', 'user.email=ada@example.com', ...args], { encoding: 'utf8' }).trim();
  git('init', '-q', '-b', 'main');
  await writeFile(join(path, '.kici/kici.lock.json'), JSON.stringify(lock));
  git('add', '-A');
  git('commit', '-qm', 'Retry the flaky integration test');
  return { path, sha: git('rev-parse', 'HEAD') };
}

/** A signed GitHub push of `sha`, as GitHub sends it: the head commit's message and author included. */
function pushDelivery(sha: string): { headers: Record<string, string>; body: string } {
  const body = JSON.stringify({
    ...{ ref: 'refs/heads/main', before: '0'.repeat(40), after: sha },
    head_commit: { id: sha, message: 'Retry the flaky integration test', author: { name: 'Ada', username: 'ada' } },
    commits: [],
    repository: { id: 1, name: 'app', full_name: 'acme/app', default_branch: 'main', private: false, owner: { login: 'acme', id: 1 } },
    sender: { login: 'ada', id: 2 },
  });
  const signature = `sha256=${createHmac('sha256', SECRET).update(body).digest('hex')}`;
  return { body, headers: { 'content-type': 'application/json', 'x-github-event': 'push', 'x-github-delivery': `tour-${sha}`, 'x-hub-signature-256': signature } };
}

async function until<T>(check: () => Promise<T | null | undefined | false>, timeoutMs: number, what: string): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check().catch(() => null);
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

type Api = (path: string, body?: object) => Promise<Record<string, unknown>>;

/** Two runs by hand (green, then with a failing test) and one by a signed push; returns the failed one. */
async function makeRuns(api: Api, url: string, dataDir: string): Promise<string> {
  const ran = async (failing: boolean) => {
    const { runId } = (await api('/api/v1/runs', { repository: 'acme/app', startedBy: 'the tour', workflow: pipeline(failing) })) as { runId: string };
    await until(async () => ['success', 'failed', 'cancelled'].includes(String(((await api(`/api/v1/runs/${runId}`)).run as { status: string }).status)), 120_000, `run ${runId} to end`);
    return runId;
  };
  await ran(false);
  const failed = await ran(true);
  const repo = await repository(dataDir);
  await api('/api/v1/repositories', { name: 'acme/app', provider: 'local', path: repo.path });
  const push = pushDelivery(repo.sha);
  await fetch(`${url}/webhooks/github`, { method: 'POST', headers: push.headers, body: push.body });
  await until(async () => {
    const { runs } = (await api('/api/v1/runs?limit=1')) as { runs: { status: string; commit: unknown }[] };
    return runs[0]?.commit && ['success', 'failed'].includes(runs[0].status);
  }, 120_000, 'the pushed run to end');
  return failed;
}

/** The runs list, the failed run, and the failed run in the visualizer with its test job selected. */
async function photograph(page: Page, url: string, token: string, failed: string, outDir: string): Promise<void> {
  const shoot = async (name: string, address: string, waitFor: string, prepare?: (page: Page) => Promise<void>, fullPage = false) => {
    await page.goto(address);
    await page.waitForSelector('body[data-ready="true"]', { timeout: 30_000 });
    await page.waitForSelector(waitFor, { timeout: 30_000 });
    await prepare?.(page);
    await page.screenshot({ path: join(outDir, name), fullPage });
  };
  const [list, run, visualizer] = TOUR_SHOTS;
  await shoot(list, `${url}/runs/?token=${token}`, `#runs-body tr[data-run-id="${failed}"]`);
  await shoot(run, `${url}/runs/?token=${token}#run=${failed}`, '#run-graph a.graph-job[data-status="skipped"]');
  const selectTest = (p: Page) => p.locator('#jobs-body tr[data-job="test"]').click();
  await shoot(visualizer, `${url}/visualize/?token=${token}#run=${failed}`, '#run-chart g.node.current', selectTest, true);
}

export async function makeTour(outDir: string): Promise<{ files: string[]; pageErrors: string[] }> {
  const dataDir = await mkdtemp(join(tmpdir(), 'sy-tour-'));
  const port = await findFreePort();
  const url = `http://127.0.0.1:${port}`;
  const coordinator = spawn(process.execPath, ['--no-node-snapshot', '--import', 'tsx', 'src/cli/main.ts', 'start'], {
    cwd: ROOT,
    env: { ...process.env, PORT: String(port), SWITCHYARD_DATA_DIR: dataDir, LOG_FORMAT: 'json', GITHUB_WEBHOOK_SECRET: SECRET },
    detached: true,
    stdio: 'ignore',
  });
  const browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox', '--disable-gpu'] });
  try {
    await until(async () => (await fetch(`${url}/readyz`)).ok, 90_000, 'Switchyard to be ready');
    const token = (await readFile(join(dataDir, 'admin-token'), 'utf8')).trim();
    const api: Api = async (path, body) => {
      const init = body ? { method: 'POST', body: JSON.stringify(body) } : {};
      const response = await fetch(`${url}${path}`, { ...init, headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' } });
      return (await response.json()) as Record<string, unknown>;
    };
    const failed = await makeRuns(api, url, dataDir);
    await mkdir(outDir, { recursive: true });
    const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
    const pageErrors: string[] = [];
    page.on('pageerror', (error) => pageErrors.push(error.message));
    page.on('console', (message) => {
      if (message.type() === 'error') pageErrors.push(message.text());
    });
    await photograph(page, url, token, failed, outDir);
    return { files: TOUR_SHOTS.map((name) => join(outDir, name)), pageErrors };
  } finally {
    await browser.close();
    if (coordinator.pid !== undefined && coordinator.exitCode === null) process.kill(-coordinator.pid, 'SIGINT');
    await new Promise((resolve) => (coordinator.exitCode !== null ? resolve(null) : coordinator.once('exit', resolve)));
    await rm(dataDir, { recursive: true, force: true });
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const { values } = parseArgs({ options: { out: { type: 'string' } } });
  const outDir = values.out ?? fileURLToPath(new URL('./', import.meta.url));
  const { files, pageErrors } = await makeTour(outDir);
  for (const file of files) console.log(`wrote ${file}`);
  if (pageErrors.length > 0) {
    console.error(`the pages logged errors:\n${pageErrors.join('\n')}`);
    process.exitCode = 1;
  }
}
