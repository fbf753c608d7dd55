'use strict';
// The runs page: the runs list (`/runs/`) or one run (`/runs/#run=<id>`; `#<id>` and `?run=` work too).
{
  const { api, UnauthorizedError, ApiError } = window.RunsPage;
  const { renderList, fillStatuses } = window.RunsPage.list;
  const { renderRun } = window.RunsPage.run;
  const { forgetNeedsGraph } = window.RunsPage.graph;
  const { followLogs } = window.RunsPage.logs;
  const { isFinalRun } = window.RunsPage.dom;
  const $ = (id) => document.getElementById(id);
  const LIST_EVERY_MS = 3000;
  const RUN_EVERY_MS = 1000;
  /** Turns polled after a run is final, so chunks stored just after its last event are shown too. */
  const TURNS_AFTER_FINAL = 2;

  /** `generation` changes with every view shown; the loops of an older view stop at their next turn. */
  const state = { generation: 0, runId: null, detail: null };
  const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

  /** Waits `ms`, then for as long as the tab is hidden: nobody is looking, so nothing is fetched. */
  async function pause(ms) {
    await sleep(ms);
    while (document.hidden) await new Promise((resolve) => document.addEventListener('visibilitychange', resolve, { once: true }));
  }

  /** `?run=<id>` becomes `#run=<id>`, so moving between runs never reloads the page. */
  function normaliseAddress() {
    const url = new URL(location.href);
    const run = url.searchParams.get('run');
    if (!run) return;
    url.searchParams.delete('run');
    if (!url.hash) url.hash = `run=${encodeURIComponent(run)}`;
    history.replaceState(null, '', `${url.pathname}${url.search}${url.hash}`);
  }

  function wantedRunId() {
    const hash = location.hash.slice(1);
    if (!hash) return null;
    return hash.startsWith('run=') ? new URLSearchParams(hash).get('run') : decodeURIComponent(hash);
  }

  function ready() {
    document.body.setAttribute('data-ready', 'true');
    $('refreshed').textContent = `updated ${new Date().toLocaleTimeString()}`;
  }

  function show() {
    const generation = ++state.generation;
    const runId = wantedRunId();
    $('error').textContent = '';
    $('token-form').hidden = true;
    $('list-view').hidden = Boolean(runId);
    $('run-view').hidden = !runId;
    document.body.removeAttribute('data-ready');
    if (runId) void runLoop(runId, generation);
    else void listLoop(generation);
  }

  async function listLoop(generation) {
    document.title = 'Switchyard · runs';
    const parts = { body: $('runs-body'), empty: $('runs-empty'), repository: $('filter-repo'), status: $('filter-status') };
    while (generation === state.generation) {
      try {
        const runs = await api.runs(parts.status.value);
        if (generation !== state.generation) return;
        renderList(parts, runs, Date.now());
        $('error').textContent = '';
        ready();
      } catch (error) {
        if (!showError(error)) return;
      }
      await pause(LIST_EVERY_MS);
    }
  }

  function resetRunView(runId) {
    Object.assign(state, { runId, detail: null });
    document.title = `Switchyard · run ${runId}`;
    $('jobs').replaceChildren();
    forgetNeedsGraph($('run-graph'));
    $('action-message').textContent = '';
    $('run-missing').hidden = true;
    $('run-body').hidden = false;
  }

  async function runLoop(runId, generation) {
    resetRunView(runId);
    const isCurrent = () => generation === state.generation;
    const jobStatus = (jobKey) => (state.detail ? (state.detail.jobs.find((job) => job.job_key === jobKey) || {}).status : undefined);
    const logs = followLogs(runId, jobStatus, isCurrent);
    let turnsAfterFinal = 0;
    while (isCurrent() && turnsAfterFinal < TURNS_AFTER_FINAL) {
      try {
        const detail = await api.run(runId);
        if (!isCurrent()) return;
        state.detail = detail;
        await renderRun(detail, Date.now());
        if (!isCurrent()) return;
        await logs.poll();
        if (!isCurrent()) return;
        $('error').textContent = '';
        ready();
        if (isFinalRun(detail.run.status)) turnsAfterFinal++;
      } catch (error) {
        if (!isCurrent() || !onRunError(error, runId)) return;
      }
      await pause(RUN_EVERY_MS);
    }
  }

  /** A 404 is "no run <id>" and ends the view; anything else is shown. True to keep polling. */
  function onRunError(error, runId) {
    if (error instanceof ApiError && error.status === 404) {
      $('run-missing').textContent = `no run ${runId}`;
      $('run-missing').hidden = false;
      $('run-body').hidden = true;
      ready();
      return false;
    }
    return showError(error);
  }

  /** Shows the error; a refused or missing token brings the token form up. True to keep polling. */
  function showError(error) {
    if (error instanceof UnauthorizedError) {
      showTokenForm(error.message);
      return false;
    }
    $('error').textContent = String(error.message || error);
    return true;
  }

  function showTokenForm(message) {
    $('token-message').textContent = message || '';
    $('token-form').hidden = false;
    $('list-view').hidden = true;
    $('run-view').hidden = true;
  }

  async function cancelRun() {
    const runId = state.runId;
    if (!runId || !window.confirm(`Cancel run ${runId}?`)) return;
    $('cancel-run').disabled = true;
    try {
      const answer = await api.cancel(runId);
      $('action-message').textContent = answer.body.alreadyTerminal ? `the run had already ended (${answer.body.status})` : 'cancelling…';
    } catch (error) {
      actionFailed('cancel', error);
    }
  }

  /**
   * A rerun (of the whole run, or of its failed jobs only) answers 201 with the new run, which the
   * page then shows; any other answer is shown.
   */
  async function rerunRun(failedOnly) {
    const runId = state.runId;
    if (!runId) return;
    const button = $(failedOnly ? 'rerun-failed' : 'rerun-run');
    button.disabled = true;
    try {
      const answer = await api.rerun(runId, failedOnly);
      if (answer.status === 201 && answer.body && answer.body.runId) location.hash = `run=${encodeURIComponent(answer.body.runId)}`;
      else $('action-message').textContent = `rerun answered ${answer.status}`;
    } catch (error) {
      actionFailed('rerun', error);
    } finally {
      button.disabled = false;
    }
  }

  function actionFailed(what, error) {
    if (error instanceof UnauthorizedError) showTokenForm(error.message);
    else $('action-message').textContent = `${what} failed: ${error.message}`;
  }

  function wire() {
    fillStatuses($('filter-status'));
    $('filter-status').addEventListener('change', show);
    $('filter-repo').addEventListener('change', show);
    window.addEventListener('hashchange', show);
    $('cancel-run').addEventListener('click', () => void cancelRun());
    $('rerun-run').addEventListener('click', () => void rerunRun(false));
    $('rerun-failed').addEventListener('click', () => void rerunRun(true));
    $('token-form').addEventListener('submit', (event) => {
      event.preventDefault();
      api.setToken($('token-input').value);
      show();
    });
  }

  normaliseAddress();
  wire();
  if (api.hasToken()) show();
  else showTokenForm('Paste the admin token (or open this page with ?token=…).');
}
