import assert from 'node:assert/strict';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import pg from 'pg';
import type { BrowserContext, Page } from 'playwright-core';
import { skipReason, tempDir } from '../../support/database.ts';
import { CoordinatorClient, dropDatabase, runStepsWorkflow, spawnRealAgent } from '../../support/fake-agent.ts';
import type { RealAgentProcess } from '../../support/fake-agent.ts';
import { ADMIN_TOKEN, sharedDatabaseUrl, startCoordinatorProcess, stopProcess } from '../../support/processes.ts';
import type { CoordinatorProcess } from '../../support/processes.ts';
import { eventually, waitingWorkflow } from '../../support/runtime.ts';
import { browserSkipReason, launchBrowser } from '../visualize/browser.ts';

const ARTIFACTS = fileURLToPath(new URL('../../../test-artifacts/runs-page/', import.meta.url));
const LABEL = 'runs-page-agent';
const SHA = 'abcdef0123456789abcdef0123456789abcdef01';
const LINES = 8;

/** Two steps: one prints a line a second, the next fails with exit code 3. */
const liveWorkflow = runStepsWorkflow('runs-page-live', LABEL, [
  { name: 'build', steps: [['count', `for i in $(seq 1 ${LINES}); do echo "line $i"; sleep 1; done`], ['verify', 'echo checking; exit 3']] },
]);

const text = async (page: Page, selector: string) => ((await page.locator(selector).first().textContent()) ?? '').trim();

async function showing(page: Page, selector: string, wanted: string | RegExp, timeoutMs = 15_000): Promise<void> {
  let last = '';
  await eventually(async () => {
    last = (await page.locator(selector).count()) > 0 ? await text(page, selector) : '<absent>';
    return typeof wanted === 'string' ? last === wanted : wanted.test(last);
  }, timeoutMs, `${selector} to show ${String(wanted)}`).catch((error: unknown) => {
    throw new Error(`${String(error)}; it shows ${JSON.stringify(last)}`);
  });
}

/** The listed run ids, read in one go: the list is replaced on every refresh. */
function rowIds(page: Page): Promise<string[]> {
  return page.evaluate<string[]>("[...document.querySelectorAll('#runs-body tr')].map((row) => row.dataset.runId)");
}

const skip = (await skipReason('external')) ?? browserSkipReason();

/** The run's stored source as a pull request's from a sender who may not change workflows (TRUST-4) records it. */
async function markBaseRead(databaseUrl: string, runId: string): Promise<void> {
  const db = new pg.Client({ connectionString: databaseUrl });
  await db.connect();
  try {
    const fields = { trustTier: 'known', lockFileSource: 'base', workflowChangesIgnored: true };
    await db.query('UPDATE runs SET input_summary = input_summary || $1::jsonb WHERE run_id = $2', [JSON.stringify(fields), runId]);
  } finally {
    await db.end();
  }
}

describe('the runs page in a real browser (real coordinator, real reference agent)', { skip }, () => {
  let databaseUrl = '';
  let coordinator: CoordinatorProcess;
  let client: CoordinatorClient;
  let agent: RealAgentProcess;
  let browser: BrowserContext;
  let page: Page;
  const pageErrors: string[] = [];
  let waitingRun = '';
  let liveRun = '';

  const createRun = async (workflow: object, source: object): Promise<string> => {
    const created = await coordinator.api('/api/v1/runs', { method: 'POST', body: JSON.stringify({ workflow, ...source }) });
    assert.equal(created.status, 201, await created.clone().text());
    return ((await created.json()) as { runId: string }).runId;
  };
  const shot = (name: string) => page.screenshot({ path: join(ARTIFACTS, name), fullPage: true });
  const openPage = async (): Promise<Page> => {
    const opened = await browser.newPage();
    opened.on('pageerror', (error) => pageErrors.push(error.message));
    return opened;
  };
  const ready = (target: Page = page) => target.waitForSelector('body[data-ready="true"]', { timeout: 30_000 });

  before(async () => {
    await mkdir(ARTIFACTS, { recursive: true });
    databaseUrl = await sharedDatabaseUrl('external');
    coordinator = await startCoordinatorProcess({ DATABASE_URL: databaseUrl, SWITCHYARD_COORDINATOR_ID: 'coord-runs-page' });
    client = new CoordinatorClient(coordinator.url, ADMIN_TOKEN);
    const token = (await client.createToken()).token;
    agent = spawnRealAgent({ wsUrl: client.wsUrl, token, labels: [LABEL], agentId: 'agent-runs-page', workDir: await tempDir('sy-runs-page-agent-') });
    waitingRun = await createRun(waitingWorkflow('runs-page-waiting'), { repository: 'acme/other', ref: 'refs/heads/main', sha: 'HEAD' });
    await client.waitForJob(waitingRun, 'build', (job) => job.waiting_reason !== null, 15_000, 'a waiting reason');
    await markBaseRead(databaseUrl, waitingRun);
    browser = await launchBrowser();
    page = await openPage();
  });

  after(async () => {
    await browser?.close();
    await agent?.kill();
    if (coordinator) await stopProcess(coordinator);
    if (databaseUrl) await dropDatabase(databaseUrl);
    assert.deepEqual(pageErrors, [], 'no script errors on the page');
  });

  it('asks for the admin token, then lists the runs with their repository, branch, commit, trigger and status', async () => {
    await page.goto(`${coordinator.url}/runs`);
    await page.waitForSelector('#token-form:not([hidden])');
    assert.equal(new URL(page.url()).pathname, '/runs/');
    await shot('01-token-form.png');
    await page.locator('#token-input').fill(ADMIN_TOKEN);
    await page.locator('#token-form button[type="submit"]').click();
    await ready();
    const row = `#runs-body tr[data-run-id="${waitingRun}"]`;
    const { run } = await client.run(waitingRun);
    assert.equal(await text(page, `${row} .run-status`), run.status);
    assert.equal(await text(page, `${row} .run-repository`), 'acme/other');
    assert.equal(await text(page, `${row} .run-branch`), 'main');
    assert.equal(await text(page, `${row} .run-commit`), 'HEAD');
    assert.equal(await text(page, `${row} .run-trigger`), 'manual');
    assert.equal(await text(page, `${row} .run-workflow`), 'runs-page-waiting');
    assert.match(await text(page, `${row} .run-age`), /^\d+ s ago$/);
    assert.equal(await text(page, `${row} .run-number`), '#1', 'the first run of acme/other');
    assert.equal(await text(page, `${row} .run-origin`), 'started by an administrator (API)', 'a manual run says who started it');
    assert.match(await text(page, `${row} .run-duration`), /^\d+ (ms|s|min \d+ s)$/);
  });

  it('shows a new run without a reload; its view streams the step logs while the job runs, then shows steps and exit codes', async () => {
    liveRun = await createRun(liveWorkflow, { repository: 'acme/app', ref: 'refs/heads/feature/runs', sha: SHA });
    await page.waitForSelector(`#runs-body tr[data-run-id="${liveRun}"]`, { timeout: 15_000 });
    assert.deepEqual(await rowIds(page), [liveRun, waitingRun], 'newest first');
    assert.equal(await text(page, `#runs-body tr[data-run-id="${liveRun}"] .run-commit`), SHA.slice(0, 7));
    assert.equal(await text(page, `#runs-body tr[data-run-id="${liveRun}"] .run-branch`), 'feature/runs');
    await shot('02-list.png');
    await page.locator(`#runs-body tr[data-run-id="${liveRun}"] .run-repository`).click();
    await page.waitForSelector('#jobs section[data-job="build"]');
    assert.equal(new URL(page.url()).hash, `#run=${liveRun}`);
    const countLog = '#jobs section[data-job="build"] details[data-step="count"] pre.log';
    await showing(page, countLog, /line 1\b/, 30_000);
    assert.equal((await client.job(liveRun, 'build')).status, 'running', 'the first lines show while the job still runs');
    assert.doesNotMatch(await text(page, countLog), new RegExp(`line ${LINES}\\b`));
    assert.equal(await text(page, '#jobs section[data-job="build"] .job-header .badge'), 'running');
    await shot('03-live-logs.png');

    await showing(page, '#run-status', 'failed', 30_000);
    await showing(page, '#jobs section[data-job="build"] details[data-step="verify"] pre.log', 'checking');
    const lines = (await text(page, countLog)).split('\n');
    assert.deepEqual(lines, Array.from({ length: LINES }, (_, i) => `line ${i + 1}`), 'every line once, in order');
    const step = (name: string, part: string) => text(page, `#jobs section[data-job="build"] details[data-step="${name}"] ${part}`);
    assert.equal(await step('runner', '.badge'), 'success', 'the implicit runner step (checkout) has a status');
    assert.match(await step('runner', '.step-duration'), /^\d+ (ms|s)$/, 'and a duration');
    assert.equal(await step('count', '.badge'), 'success');
    assert.match(await step('count', '.step-duration'), /^\d+ s$/);
    assert.equal(await step('verify', '.badge'), 'failed');
    assert.equal(await step('verify', '.step-exit'), 'exit 3');
    assert.equal(await step('verify', '.step-error'), 'exit code 3');
    assert.equal(await text(page, '#jobs section[data-job="build"] .job-header .badge'), 'failed');
    assert.match(await text(page, '#jobs section[data-job="build"] .job-facts'), /attempt 1 · agent agent-runs-page/);
    assert.match(await text(page, '#jobs section[data-job="build"] .job-facts'), /queued \d+ (ms|s) · ran \d+ (ms|s)/, 'its queued time and its run time');
    assert.match(await text(page, '#jobs section[data-job="build"] .job-outcome'), /verify.*exit code 3/);
    assert.equal(await text(page, '#run-meta [data-field="commit"]'), SHA.slice(0, 7));
    assert.equal(await page.locator('#cancel-run').isDisabled(), true, 'a finished run cannot be cancelled');
    assert.equal(await page.locator('#statechart-link').getAttribute('href'), `/visualize/#run=${liveRun}`);
    await shot('04-run-finished.png');
  });

  it('filters the list by repository and by status', async () => {
    await page.locator('header nav a', { hasText: 'all runs' }).click();
    await ready();
    assert.deepEqual(await rowIds(page), [liveRun, waitingRun]);
    await page.locator('#filter-repo').selectOption('acme/other');
    await eventually(async () => JSON.stringify(await rowIds(page)) === JSON.stringify([waitingRun]), 10_000, 'only acme/other');
    await page.locator('#filter-repo').selectOption('');
    await page.locator('#filter-status').selectOption('failed');
    await eventually(async () => JSON.stringify(await rowIds(page)) === JSON.stringify([liveRun]), 10_000, 'only failed runs');
    await shot('05-filtered.png');
    await page.locator('#filter-status').selectOption('cancelled');
    await showing(page, '#runs-empty', 'No run matches the filters.');
    await page.locator('#filter-status').selectOption('');
    await eventually(async () => (await rowIds(page)).length === 2, 10_000, 'both runs again');
  });

  it('says why a job waits, and cancels the run once the confirmation is accepted', async () => {
    await page.locator(`#runs-body tr[data-run-id="${waitingRun}"] .run-workflow a`).click();
    await showing(page, '#run-waiting li[data-job="build"]', /^build: needs an agent .*label-nobody-has/);
    await showing(page, '#jobs section[data-job="build"] .job-waiting', /^Waiting: needs an agent .*label-nobody-has/);
    assert.equal(await text(page, '#run-meta [data-field="lock file"]'), 'base commit (sender known); its workflow changes were not run');
    assert.equal(await text(page, '#jobs section[data-job="build"] .job-header .badge'), 'pending');
    await shot('06-waiting.png');
    page.once('dialog', (dialog) => void dialog.dismiss());
    await page.locator('#cancel-run').click();
    await new Promise((resolve) => setTimeout(resolve, 1500));
    assert.notEqual((await client.run(waitingRun)).run.status, 'cancelled', 'a dismissed confirmation cancels nothing');
    page.once('dialog', (dialog) => {
      assert.match(dialog.message(), new RegExp(`Cancel run ${waitingRun}`));
      void dialog.accept();
    });
    await page.locator('#cancel-run').click();
    await showing(page, '#run-status', 'cancelled');
    await showing(page, '#jobs section[data-job="build"] .job-header .badge', 'cancelled');
    assert.equal(await page.locator('#run-waiting').isHidden(), true, 'a cancelled job waits for nothing');
    assert.equal(await page.locator('#jobs section[data-job="build"] .job-waiting').isHidden(), true);
    await shot('07-cancelled.png');
  });

  it('Rerun opens the new run on 201 and shows the error of any other answer', async () => {
    await page.goto(`${coordinator.url}/runs/#run=${liveRun}`);
    await showing(page, '#run-status', 'failed');
    await page.locator('#rerun-run').click();
    const outcome = await eventually(async () => {
      const hash = new URL(page.url()).hash;
      if (hash !== `#run=${liveRun}`) return 'navigated';
      return /^rerun failed: .+/.test(await text(page, '#action-message')) ? 'refused' : null;
    }, 15_000, 'the rerun to navigate or show its error');
    if (outcome === 'navigated') {
      const rerun = decodeURIComponent(new URL(page.url()).hash.slice('#run='.length));
      await showing(page, '#run-id', rerun);
      await showing(page, '#run-title', 'runs-page-live #2'); // a rerun is the next run of its repository
      assert.equal(await page.locator('#run-meta [data-field="rerun of"] a').getAttribute('href'), `#run=${liveRun}`);
      assert.equal(await text(page, '#run-meta [data-field="trigger"]'), 'manual (rerun)');
    }
    await shot('08-rerun.png');
  });

  it('Rerun failed jobs opens a rerun of the failed run; it is disabled while a run is not failed or cancelled', async () => {
    await page.goto(`${coordinator.url}/runs/#run=${liveRun}`);
    await showing(page, '#run-status', 'failed');
    assert.equal(await page.locator('#rerun-failed').isDisabled(), false);
    await page.locator('#rerun-failed').click();
    await eventually(() => new URL(page.url()).hash !== `#run=${liveRun}`, 15_000, 'the failed-only rerun to open');
    const rerun = decodeURIComponent(new URL(page.url()).hash.slice('#run='.length));
    await showing(page, '#run-id', rerun);
    assert.equal(await page.locator('#run-meta [data-field="rerun of"] a').getAttribute('href'), `#run=${liveRun}`);
    const answer = (await (await coordinator.api(`/api/v1/runs/${rerun}`)).json()) as { rerunOf: string; run: { status: string } };
    assert.equal(answer.rerunOf, liveRun);
    if (!['failed', 'cancelled'].includes(answer.run.status)) assert.equal(await page.locator('#rerun-failed').isDisabled(), true);
  });

  it('says "no run <id>" for an unknown run, and takes ?token= out of the address bar', async () => {
    await page.goto(`${coordinator.url}/runs/#run=no-such-run`);
    await showing(page, '#run-missing', 'no run no-such-run');
    assert.equal(await page.locator('#run-body').isHidden(), true);
    await shot('09-missing.png');
    const fresh = await openPage();
    await fresh.goto(`${coordinator.url}/runs?token=${ADMIN_TOKEN}&run=${waitingRun}`);
    await ready(fresh);
    assert.doesNotMatch(fresh.url(), /token=/);
    assert.equal(new URL(fresh.url()).hash, `#run=${waitingRun}`);
    await showing(fresh, '#run-status', 'cancelled');
    await fresh.close();
  });

  it('a refused token brings the token form back with the reason', async () => {
    const fresh = await openPage();
    await fresh.goto(`${coordinator.url}/runs/?token=not-the-token`);
    await fresh.waitForSelector('#token-form:not([hidden])');
    assert.equal(await text(fresh, '#token-message'), 'the admin token was refused');
    assert.equal(await fresh.locator('#list-view').isHidden(), true);
    await fresh.locator('#token-input').fill(ADMIN_TOKEN);
    await fresh.locator('#token-form button[type="submit"]').click();
    await ready(fresh);
    assert.deepEqual((await rowIds(fresh)).slice(-2), [liveRun, waitingRun]);
    await fresh.close();
  });

  it('lists a run’s jobs in pipeline order (what a job needs comes first), each saying what it needs', async () => {
    const jobs = [
      { name: 'deploy', needs: ['test'], steps: [['ship', 'true']] as [string, string][] },
      { name: 'lint', steps: [['lint', 'true']] as [string, string][] },
      { name: 'test', needs: ['lint'], steps: [['test', 'true']] as [string, string][] },
    ];
    const runId = await createRun(runStepsWorkflow('runs-page-pipeline', 'label-nobody-has', jobs), { repository: 'acme/pipeline', ref: 'refs/heads/main', sha: 'HEAD' });
    await page.goto(`${coordinator.url}/runs/#run=${runId}`);
    await page.waitForSelector('#jobs section[data-job="deploy"]');
    const order = await Promise.all((await page.locator('#jobs section').all()).map((section) => section.getAttribute('data-job')));
    assert.deepEqual(order, ['lint', 'test', 'deploy']);
    assert.match(await text(page, '#jobs section[data-job="deploy"] .job-facts'), /needs test/);
    assert.doesNotMatch(await text(page, '#jobs section[data-job="lint"] .job-facts'), /needs/);
    await showing(page, '#run-title', 'runs-page-pipeline #1');
    // The needs graph: a box per job, coloured by status, left to right in pipeline order, an arrow per need.
    await page.waitForSelector('#run-graph svg a.graph-job[data-job="deploy"][data-status="pending"]');
    const boxes = await page.evaluate<{ job: string; x: number }[]>(
      "[...document.querySelectorAll('#run-graph a.graph-job')].map((box) => ({ job: box.dataset.job, x: box.getBoundingClientRect().x }))",
    );
    assert.deepEqual([...boxes].sort((a, b) => a.x - b.x).map((box) => box.job), ['lint', 'test', 'deploy']);
    assert.equal(await page.locator('#run-graph path.graph-need').count(), 2, 'deploy → test and test → lint');
    assert.equal(await page.locator('#run-graph a.graph-job[data-job="test"]').getAttribute('href'), `#run=${runId}&job=test`);
    await shot('10-needs-graph.png');
    await client.cancel(runId, { force: true });
    await page.waitForSelector('#run-graph a.graph-job[data-job="lint"][data-status="cancelled"]', { timeout: 15_000 });
    await page.locator('#run-graph a.graph-job[data-job="deploy"]').click();
    assert.equal(new URL(page.url()).hash, `#run=${runId}`, 'a box scrolls to its job, it does not leave the run');
    assert.equal(await page.locator('#jobs section[data-job="deploy"]').isVisible(), true);
  });

  it('an archived run still shows, saying it is archived, with its steps and logs read from its archive', async () => {
    const archived = await coordinator.api('/api/v1/retention', { method: 'POST', body: JSON.stringify({ olderThan: '0s' }) });
    assert.equal(archived.status, 200, await archived.clone().text());
    await page.goto(`${coordinator.url}/runs/#run=${liveRun}`);
    await showing(page, '#run-meta [data-field="history"]', 'archived: its journal and logs are read from its archive');
    await showing(page, '#jobs section[data-job="build"] details[data-step="verify"] pre.log', 'checking');
    assert.equal(await text(page, '#run-status'), 'failed');
  });

  it('takes a run by its number or its 8-character prefix, as the page shows them', async () => {
    await page.goto(`${coordinator.url}/runs/#run=${liveRun.slice(0, 8)}`);
    await showing(page, '#run-id', liveRun);
    await page.goto(`${coordinator.url}/runs/#run=${encodeURIComponent('acme/other#1')}`);
    await showing(page, '#run-id', waitingRun);
  });
});
