import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { after, before, describe, it } from 'node:test';
import pg from 'pg';
import type { BrowserContext, Page } from 'playwright-core';
import { externalAdminConfig, externalUrl, skipReason, tempDir } from '../../support/database.ts';
import { CoordinatorClient, FakeAgent, runStepsWorkflow } from '../../support/fake-agent.ts';
import { ADMIN_TOKEN, startCoordinatorProcess, stopProcess } from '../../support/processes.ts';
import type { CoordinatorProcess } from '../../support/processes.ts';
import { eventually, waitingWorkflow } from '../../support/runtime.ts';
import { ARTIFACTS, browserSkipReason, launchBrowser } from './browser.ts';

const ROOT = fileURLToPath(new URL('../../..', import.meta.url));

async function admin(statement: string): Promise<void> {
  const client = new pg.Client(externalAdminConfig());
  await client.connect();
  await client.query(statement);
  await client.end();
}

/** `switchyard <args>` as a real process; resolves with its exit code and output. */
function cli(args: string[], env: Record<string, string>): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['--no-node-snapshot', '--import', 'tsx', 'src/cli/main.ts', ...args], { cwd: ROOT, env: { ...process.env, ...env } });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.once('exit', (code) => resolve({ code, stdout, stderr }));
  });
}

async function ready(page: Page): Promise<void> {
  await page.waitForSelector('body[data-ready="true"]', { timeout: 30_000 });
}

const text = (page: Page, selector: string) => page.locator(selector).first().textContent();

async function showing(page: Page, selector: string, wanted: string | RegExp, timeoutMs = 10_000): Promise<void> {
  await eventually(async () => {
    const shown = (await text(page, selector)) ?? '';
    return typeof wanted === 'string' ? shown === wanted : wanted.test(shown);
  }, timeoutMs, `${selector} to show ${String(wanted)}`);
}

const skip = (await skipReason('external')) ?? browserSkipReason();

describe('the visualizer in a real browser (Debian chromium, real coordinator process)', { skip }, () => {
  const database = `sy_viz_${process.pid}_${randomBytes(4).toString('hex')}`;
  let coordinator: CoordinatorProcess;
  let browser: BrowserContext;
  let page: Page;
  let runId = '';

  before(async () => {
    await admin(`CREATE DATABASE "${database}"`);
    coordinator = await startCoordinatorProcess({ DATABASE_URL: externalUrl(database), SWITCHYARD_COORDINATOR_ID: 'coord-viz' });
    const created = await coordinator.api('/api/v1/runs', { method: 'POST', body: JSON.stringify({ workflow: waitingWorkflow('viz', { jobs: ['build', 'test'] }) }) });
    assert.equal(created.status, 201, await created.clone().text());
    runId = ((await created.json()) as { runId: string }).runId;
    await eventually(async () => {
      const history = (await (await coordinator.api(`/api/v1/runs/${runId}/history`)).json()) as { events: { event: { type: string } }[] };
      return history.events.some((e) => e.event.type === 'placement.none');
    }, 10_000, 'the build job to wait for an agent');
    browser = await launchBrowser();
    page = await browser.newPage();
    page.on('pageerror', (error) => assert.fail(`page error: ${error.message}`));
  });

  after(async () => {
    await browser?.close();
    if (coordinator) await stopProcess(coordinator);
    await admin(`DROP DATABASE IF EXISTS "${database}" WITH (FORCE)`);
  });

  it('opens on the user view: the run chart shows only the transitions that can fire, the job chart its top-level states until one is opened', async () => {
    await page.setViewportSize({ width: 1400, height: 900 });
    await page.goto(`${coordinator.url}/visualize?token=${ADMIN_TOKEN}#run=${runId}`);
    await ready(page);
    assert.doesNotMatch(page.url(), /token=/, 'the token leaves the address bar');
    assert.equal(await page.locator('#run-chart g.node.current[data-id="run.active.pending"]').count(), 1);
    const shownEdges = await page.evaluate<{ shown: number; possible: number }>(`(() => {
      const paths = [...document.querySelectorAll('#run-chart path.edge')].filter((p) => getComputedStyle(p).display !== 'none');
      return { shown: paths.length, possible: paths.filter((p) => p.classList.contains('possible')).length };
    })()`);
    assert.ok(shownEdges.shown > 0 && shownEdges.shown === shownEdges.possible, `only the transitions that can fire are drawn: ${JSON.stringify(shownEdges)}`);
    const drawn = await page.evaluate<string[]>("[...document.querySelectorAll('#job-chart svg g.node')].map((node) => node.dataset.id)");
    assert.deepEqual(drawn.filter((id) => id.split('.').length !== 2), [], "the job chart's top-level states alone");
    assert.ok(drawn.length >= 5, drawn.join(' '));
    assert.equal(await page.locator('#job-chart g.node.current.collapsed[data-id="job.waiting"]').count(), 1, 'the job is in waiting, collapsed');
    assert.equal(await page.locator('#job-chart g.node[data-id="job.waiting.agent"]').count(), 0);
    assert.equal(await page.locator('#runs-page-link').getAttribute('href'), `/runs/#run=${runId}`, 'the same run on the runs page');
    assert.ok((await page.locator('#event-list li').count()) >= 2, 'the event timeline');
    await page.screenshot({ path: join(ARTIFACTS, '00-user-view-1400x900.png') });
    await page.locator('#job-chart g.node[data-id="job.waiting"]').click();
    await page.waitForSelector('#job-chart g.node.current[data-id="job.waiting.agent"]');
    assert.equal(await page.locator('#job-chart g.node.active[data-id="job.waiting"]').count(), 1, 'opened: its states inside, the current one highlighted');
    await page.screenshot({ path: join(ARTIFACTS, '00-user-view-opened-1400x900.png') });
    await page.locator('#job-chart g.node[data-id="job.waiting"] > text').click(); // its title closes it
    await page.waitForSelector('#job-chart g.node.current.collapsed[data-id="job.waiting"]');
    await page.setViewportSize({ width: 1400, height: 1000 });
  });

  it('the full charts are one click away: every state and transition, the live state highlighted', async () => {
    await page.locator('#full-charts').check();
    await page.waitForSelector('#job-chart g.node[data-id="job.waiting.agent"]');
    assert.ok((await page.locator('#run-chart svg g.node').count()) >= 9, 'run chart states');
    assert.ok((await page.locator('#job-chart svg g.node').count()) >= 20, 'job chart states');
    assert.ok((await page.locator('#job-chart svg g.node.compound rect').count()) >= 3, 'compound states drawn as boxes');
    assert.ok((await page.locator('#run-chart svg path.edge').count()) > 10, 'transitions drawn');
    assert.ok((await page.locator('#run-chart svg text.edge-label').count()) > 5, 'transitions labelled');
    assert.equal(await page.locator('#scaler-chart svg g.node').count(), 2, 'scaler chart states: active, draining');
    assert.equal(await page.locator('#scalerAgent-chart svg g.node').count(), 7, 'scaler agent chart states');
    assert.equal(await page.locator('#scalerAgent-chart svg g.node.final').count(), 2, 'destroyed and spawnFailed are final');
    assert.equal(await page.locator(`#runs button[data-run-id="${runId}"]`).count(), 1);
    assert.equal(await page.locator('#run-chart g.node.current[data-id="run.active.pending"]').count(), 1);
    assert.equal(await text(page, '#jobs-body tr[data-job="build"] .job-state'), 'waiting.agent');
    assert.match((await text(page, '#jobs-body tr[data-job="build"] .job-waiting')) ?? '', /no_matching_agent: needs an agent that can execute run steps; none connected with labels label-nobody-has/);
    assert.match((await text(page, '#jobs-body tr[data-job="test"] .job-waiting')) ?? '', /needs: waiting for upstream jobs: build/);
    assert.equal(await page.locator('#job-chart g.node.current[data-id="job.waiting.agent"]').count(), 1);
    assert.equal(await page.locator('#job-chart g.node.active[data-id="job.waiting"]').count(), 1);
    await page.waitForSelector('#step-details .match.ok');
    await showing(page, '#connection', 'live');
    await page.screenshot({ path: join(ARTIFACTS, '01-live.png'), fullPage: true });
  });

  it('updates live when the run is cancelled through the API', async () => {
    const cancel = await coordinator.api(`/api/v1/runs/${runId}/cancel`, { method: 'POST', body: '{}' });
    assert.equal(cancel.status, 202);
    await showing(page, '#run-status', 'cancelled');
    await page.waitForSelector('#run-chart g.node.current[data-id="run.cancelled"]');
    await page.waitForSelector('#job-chart g.node.current[data-id="job.cancelled"]');
    assert.equal(await text(page, '#jobs-body tr[data-job="build"] .job-state'), 'cancelled');
    assert.equal(await text(page, '#jobs-body tr[data-job="build"] .job-waiting'), '', 'a finished job shows no waiting reason');
    assert.equal(await text(page, `#runs button[data-run-id="${runId}"] .badge`), 'cancelled');
    await page.screenshot({ path: join(ARTIFACTS, '02-cancelled.png'), fullPage: true });
  });

  it('scrubs the timeline back to an earlier state', async () => {
    await page.locator('#event-list li[data-seq="0"]').click();
    await page.waitForSelector('#timeline-label[data-seq="0"]');
    assert.equal(await page.locator('#run-chart g.node.current[data-id="run.active.pending"]').count(), 1);
    assert.equal(await page.locator('#run-chart g.node.active[data-id="run.cancelled"]').count(), 0);
    assert.equal(await text(page, '#jobs-body tr[data-job="build"] .job-state'), 'queued');
    assert.match((await text(page, '#step-details h4')) ?? '', /run\.created/);
    await showing(page, '#step-details .replay-note', /replay of seq 0\.\.2: exact/);
    await page.locator('#timeline-range').fill('1');
    await page.waitForSelector('#timeline-label[data-seq="1"]');
    assert.equal(await text(page, '#jobs-body tr[data-job="build"] .job-state'), 'waiting.agent');
    assert.match((await text(page, '#jobs-body tr[data-job="build"] .job-waiting')) ?? '', /no_matching_agent/, 'the reason at that seq, from the replay');
    assert.equal(await page.locator('#follow-live').isVisible(), true);
    await page.screenshot({ path: join(ARTIFACTS, '03-scrubbed.png'), fullPage: true });
    await page.locator('#follow-live').click();
    await page.waitForSelector('#run-chart g.node.current[data-id="run.cancelled"]');
  });

  it('shows each job’s steps as the agent reported them: status, duration, exit code, and the failed step as the reason', async () => {
    const client = new CoordinatorClient(coordinator.url, ADMIN_TOKEN);
    const agent = await FakeAgent.connect(client.wsUrl, (await client.createToken()).token, { labels: ['viz-steps'] });
    const stepsRun = await client.createRun(runStepsWorkflow('viz-steps', 'viz-steps', [{ name: 'build', steps: [['compile', 'make'], ['test', 'make test']] }]));
    const dispatch = await agent.next('job.dispatch');
    const attempt = { runId: dispatch.runId, jobId: dispatch.jobId };
    agent.ack(attempt);
    agent.status(attempt, 'running');
    const step = (stepIndex: number, stepName: string, state: string, data: object) =>
      agent.send({ type: 'step.status', messageId: randomUUID(), ...attempt, stepIndex, stepName, state, timestamp: Date.now(), data });
    step(0, 'compile', 'success', { durationMs: 1200 });
    step(1, 'test', 'failed', { durationMs: 300, error: { message: 'tests failed', exitCode: 2 } });
    agent.status(attempt, 'failed');
    await client.waitForRunStatus(stepsRun, 'failed');
    await agent.close();
    await page.locator(`#runs button[data-run-id="${stepsRun}"]`).click();
    await showing(page, '#jobs-body tr[data-job="build"] .job-state', 'failed');
    assert.equal(await text(page, '#jobs-body tr[data-job="build"] .job-steps [data-step="compile"]'), 'compile success (1200 ms)');
    assert.equal(await text(page, '#jobs-body tr[data-job="build"] .job-steps [data-step="test"]'), 'test failed (300 ms, exit 2)');
    assert.equal(await text(page, '#jobs-body tr[data-job="build"] .job-outcome'), 'step test failed (exit code 2): tests failed');
    await page.screenshot({ path: join(ARTIFACTS, '05-steps.png'), fullPage: true });
    await page.locator(`#runs button[data-run-id="${runId}"]`).click();
  });

  it('asks for the token when the page is opened without one', async () => {
    const fresh = await browser.newPage();
    await fresh.goto(`${coordinator.url}/visualize`);
    await fresh.waitForSelector('#token-form:not([hidden])');
    await fresh.locator('#token-input').fill(ADMIN_TOKEN);
    await fresh.locator('#token-form button[type="submit"]').click();
    await ready(fresh);
    assert.equal(await fresh.locator(`#runs button[data-run-id="${runId}"]`).count(), 1);
    await fresh.close();
  });

  it('switchyard replay --url and visualize --out: the offline copy opens from file:// without a server', async () => {
    const env = { SWITCHYARD_ADMIN_TOKEN: ADMIN_TOKEN };
    const replay = await cli(['replay', runId, '--url', coordinator.url], env);
    assert.equal(replay.code, 0, replay.stderr);
    assert.match(replay.stdout, /result: exact/);
    const dir = await tempDir('sy-viz-offline-');
    const exported = await cli(['visualize', '--out', dir, '--run', runId, '--url', coordinator.url], env);
    assert.equal(exported.code, 0, exported.stderr);
    const offline = await browser.newPage();
    offline.on('pageerror', (error) => assert.fail(`offline page error: ${error.message}`));
    await offline.goto(pathToFileURL(join(dir, 'index.html')).href);
    await ready(offline);
    assert.equal(await offline.locator('#runs-page-link').isHidden(), true, 'no runs page offline');
    await offline.locator('#full-charts').check();
    await offline.waitForSelector('#job-chart g.node[data-id="job.waiting.agent"]');
    assert.ok((await offline.locator('#job-chart svg g.node').count()) >= 20);
    assert.equal(await text(offline, '#run-status'), 'cancelled');
    assert.equal(await offline.locator('#run-chart g.node.current[data-id="run.cancelled"]').count(), 1);
    assert.match((await text(offline, '#connection')) ?? '', /offline copy/);
    await offline.locator('#event-list li[data-seq="1"]').click();
    await offline.waitForSelector('#timeline-label[data-seq="1"]');
    assert.equal(await text(offline, '#jobs-body tr[data-job="build"] .job-state'), 'waiting.agent');
    await offline.screenshot({ path: join(ARTIFACTS, '04-offline.png'), fullPage: true });
    await offline.close();
  });
});
