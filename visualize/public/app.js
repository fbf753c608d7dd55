'use strict';
// The page: pick a run, see its run and job charts highlighted at the live or a scrubbed seq.
{
  const { source, chart, view, UnauthorizedError } = window.Switchyard;
  const $ = (id) => document.getElementById(id);

  const state = {
    graphs: new Map(),
    charts: {},
    runs: [],
    runId: null,
    detail: null,
    history: [],
    replay: null,
    replayNote: '',
    /** null follows the latest seq; a number is a scrubbed position. */
    viewSeq: null,
    jobKey: null,
    loads: 0,
    /** The job chart's compound states shown open in the user view (the full chart opens them all). */
    openedJobStates: new Set(),
  };

  function debounce(fn, ms) {
    let handle = null;
    return () => {
      clearTimeout(handle);
      handle = setTimeout(fn, ms);
    };
  }

  function currentSeq() {
    const last = state.history.length - 1;
    return state.viewSeq === null ? last : Math.min(state.viewSeq, last);
  }

  function replayStep(seq) {
    return state.replay && state.replay.steps[seq] ? state.replay.steps[seq] : null;
  }

  /** A job waits while in `waiting.*`, or before it was spawned (a run that never started). */
  function isWaiting(value) {
    return value === 'pending' || (typeof value === 'object' && value !== null && 'waiting' in value);
  }

  /** Jobs at `seq`: the state from the journal; reason, attempt and agent live or from replay. */
  function jobRows(seq, entry) {
    const jobs = (entry && entry.stateAfter && entry.stateAfter.jobs) || {};
    const live = seq === state.history.length - 1;
    const projected = new Map(((state.detail && state.detail.jobs) || []).map((job) => [job.job_key, job]));
    const step = replayStep(seq);
    const keys = [...new Set([...Object.keys(jobs), ...projected.keys()])].sort();
    return keys.map((key) => {
      const job = projected.get(key);
      const value = key in jobs ? jobs[key] : job && job.status;
      const reason = live && job ? job.waiting_reason : step ? step.waiting[key] || null : null;
      return {
        key,
        value,
        waiting: isWaiting(value) ? reason : null,
        attempt: live && job ? job.attempt : undefined,
        agent: live && job ? job.agent_id || undefined : undefined,
        steps: live && job ? job.steps || [] : [],
        outcome: live && job ? job.outcome || undefined : undefined,
      };
    });
  }

  function renderRun() {
    const seq = currentSeq();
    const entry = state.history[seq];
    const runValue = entry && entry.stateAfter ? entry.stateAfter.run : null;
    const number = state.detail && state.detail.run.number != null ? ` #${state.detail.run.number}` : '';
    $('run-title').textContent = state.detail ? `${state.detail.run.workflow_name || 'run'}${number} · ${state.runId}` : state.runId || '';
    $('runs-page-link').hidden = source.offline || !state.runId;
    if (state.runId) $('runs-page-link').href = `/runs/#run=${encodeURIComponent(state.runId)}`;
    $('run-status').textContent = state.detail ? state.detail.run.status : '—';
    $('run-status').className = `badge status-${state.detail ? state.detail.run.status : 'none'}`;
    $('run-state').textContent = view.stateText(runValue);
    if (state.charts.run) state.charts.run.highlight(runValue);
    const rows = jobRows(seq, entry);
    if (!state.jobKey || !rows.some((row) => row.key === state.jobKey)) state.jobKey = rows.length > 0 ? rows[0].key : null;
    view.renderJobs($('jobs-body'), rows, state.jobKey, (key) => {
      state.jobKey = key;
      renderRun();
    });
    const selected = rows.find((row) => row.key === state.jobKey);
    $('job-title').textContent = selected ? `Job ${selected.key}` : 'Job';
    if (state.charts.job) state.charts.job.highlight(selected ? selected.value : null);
    const timeline = { key: state.runId, range: $('timeline-range'), label: $('timeline-label'), live: $('follow-live'), list: $('event-list') };
    view.renderTimeline(timeline, state.history, seq, seek);
    view.renderDetails($('step-details'), entry, replayStep(seq), state.replayNote);
  }

  function seek(seq) {
    state.viewSeq = seq >= state.history.length - 1 ? null : seq;
    renderRun();
  }

  function renderRuns() {
    view.renderRuns($('runs'), state.runs, state.runId, $('active-only').checked, selectRun);
  }

  async function loadReplay(runId) {
    try {
      const report = await source.replay(runId);
      if (state.runId !== runId) return;
      state.replay = report;
      state.replayNote = report.exact ? `replay of seq 0..${report.to}: exact` : report.divergence ? `replay diverges first at seq ${report.divergence.seq}` : 'replay is not exact (end state differs)';
    } catch (error) {
      if (state.runId === runId) state.replayNote = `replay unavailable: ${error.message}`;
    }
    if (state.runId === runId) renderRun();
  }

  async function selectRun(runId) {
    Object.assign(state, { runId, viewSeq: null, replay: null, replayNote: 'replaying…', detail: null, history: [], jobKey: null });
    if (!source.offline) history.replaceState(null, '', `#run=${encodeURIComponent(runId)}`);
    renderRuns();
    const load = ++state.loads;
    const loaded = await Promise.all([source.run(runId), source.history(runId)]).catch(showError);
    if (load !== state.loads || !loaded) return;
    Object.assign(state, { detail: loaded[0], history: loaded[1] });
    renderRun();
    void loadReplay(runId);
  }

  const refreshRuns = debounce(async () => {
    state.runs = await source.runs().catch(showError) || state.runs;
    renderRuns();
  }, 250);

  const refreshDetail = debounce(async () => {
    const runId = state.runId;
    const detail = await source.run(runId).catch(() => null);
    if (detail && state.runId === runId) {
      state.detail = detail;
      renderRun();
    }
  }, 200);

  const refreshReplay = debounce(() => void loadReplay(state.runId), 400);

  const reloadHistory = debounce(async () => {
    const runId = state.runId;
    const events = await source.history(runId).catch(() => null);
    if (events && state.runId === runId) {
      state.history = events;
      renderRun();
    }
  }, 100);

  function onFrame(frame) {
    if (frame.type !== 'run.update') return;
    const listed = state.runs.find((run) => run.run_id === frame.runId);
    if (listed) listed.status = frame.status;
    else refreshRuns();
    renderRuns();
    if (frame.runId !== state.runId) return;
    if (frame.seq === state.history.length) state.history.push({ seq: frame.seq, event: frame.event, receivedAt: frame.receivedAt, stateAfter: frame.stateAfter });
    else if (frame.seq > state.history.length) reloadHistory();
    if (state.detail) state.detail.run.status = frame.status;
    refreshDetail();
    refreshReplay();
    renderRun();
  }

  function showError(error) {
    if (error instanceof UnauthorizedError) showTokenForm(error.message);
    else $('error').textContent = String(error.message || error);
    return null;
  }

  function showTokenForm(message) {
    $('token-message').textContent = message || '';
    $('token-form').hidden = false;
  }

  /** The user view: the job chart's top-level states, each compound one opened by a click; the full chart: every state. */
  function drawJobChart() {
    const full = $('full-charts').checked;
    const options = { guards: $('show-guards').checked, opened: full ? null : state.openedJobStates, onToggle: toggleJobState };
    return chart.draw($('job-chart'), state.graphs.get('job'), options);
  }

  async function toggleJobState(id) {
    // Closing a state closes the states opened inside it too.
    if (!state.openedJobStates.has(id)) state.openedJobStates.add(id);
    else for (const opened of [...state.openedJobStates]) if (opened === id || opened.startsWith(`${id}.`)) state.openedJobStates.delete(opened);
    state.charts.job = await drawJobChart();
    renderRun();
  }

  async function drawCharts() {
    if (state.graphs.size === 0) for (const graph of await source.machines()) state.graphs.set(graph.id, graph);
    const options = { guards: $('show-guards').checked };
    const [run, concurrency] = ['run', 'concurrency'].map((id) => state.graphs.get(id));
    [state.charts.run, state.charts.job, state.charts.concurrency] = await Promise.all([
      chart.draw($('run-chart'), run, options),
      drawJobChart(),
      chart.draw($('concurrency-chart'), concurrency, options),
    ]);
    // The scaler and its agents are charts without a run; an archive from an older build may lack them.
    for (const id of ['scaler', 'scalerAgent']) {
      const graph = state.graphs.get(id);
      if (graph) state.charts[id] = await chart.draw($(`${id}-chart`), graph, options);
    }
  }

  async function start() {
    $('token-form').hidden = true;
    $('error').textContent = '';
    try {
      await drawCharts();
      state.runs = await source.runs();
    } catch (error) {
      showError(error);
      return;
    }
    renderRuns();
    source.watch(onFrame, (text) => ($('connection').textContent = text));
    const wanted = new URLSearchParams(location.hash.slice(1)).get('run');
    const first = state.runs.find((run) => run.run_id === wanted) || state.runs[0];
    if (first) await selectRun(first.run_id);
    document.body.setAttribute('data-ready', 'true');
  }

  function wire() {
    $('timeline-range').addEventListener('input', (event) => seek(Number(event.target.value)));
    $('follow-live').addEventListener('click', () => seek(state.history.length - 1));
    $('active-only').addEventListener('change', renderRuns);
    $('show-guards').addEventListener('change', () => void drawCharts().then(renderRun, showError));
    $('actual-size').addEventListener('change', () => document.body.classList.toggle('actual-size', $('actual-size').checked));
    $('full-charts').addEventListener('change', () => {
      document.body.classList.toggle('full-charts', $('full-charts').checked);
      void drawJobChart().then((job) => {
        state.charts.job = job;
        renderRun();
      }, showError);
    });
    $('token-form').addEventListener('submit', (event) => {
      event.preventDefault();
      source.setToken($('token-input').value);
      void start();
    });
  }

  wire();
  if (source.hasToken()) void start();
  else showTokenForm('Paste the admin token (or open this page with ?token=…).');
}
