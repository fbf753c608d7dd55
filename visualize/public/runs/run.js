'use strict';
// A run's view: its header, why each waiting job waits, and every job with its steps.
{
  const { h, badge, duration, clock, sourceOf, shortSha, isFinalRun, isFinalJob } = window.RunsPage.dom;
  const { renderNeedsGraph } = window.RunsPage.graph;
  const $ = (id) => document.getElementById(id);
  const RUNNER_STEP = -1;

  /** A job waits (`pending`) with the reason the run machine recorded; any other status does not. */
  const waitingOf = (job) => (job.status === 'pending' && job.waiting_reason ? job.waiting_reason : null);

  const runLink = (runId) => h('a', { href: `#run=${encodeURIComponent(runId)}` }, runId.slice(0, 8));

  function renderHeader(detail, now) {
    const { run } = detail;
    const source = sourceOf(run);
    $('run-title').textContent = `${run.workflow_name || '(unnamed)'}${run.number != null ? ` #${run.number}` : ''}`;
    $('run-id').textContent = run.run_id;
    $('run-status').replaceWith(Object.assign(badge(run.status), { id: 'run-status' }));
    const ended = run.finished_at ? Number(run.finished_at) : now;
    const fields = [
      ['repository', run.repository || '—'],
      ['branch', source.branch || '—'],
      ['commit', shortSha(source.sha) || '—'],
      ...(run.commit && run.commit.message ? [['message', run.commit.message]] : []),
      ...(run.commit && run.commit.author ? [['author', run.commit.author]] : []),
      ...(run.startedBy ? [['started by', run.startedBy]] : []),
      ['trigger', source.trigger],
      ['started', clock(run.created_at)],
      ['duration', duration(ended - Number(run.created_at)) || '—'],
      ...(run.archived ? [['history', 'archived: its journal and logs are read from its archive']] : []),
      ...(source.baseRead ? [['lock file', source.baseRead]] : []),
      ...(source.rerunOf ? [['rerun of', h('a', { href: `#run=${encodeURIComponent(source.rerunOf)}` }, source.rerunOf.slice(0, 8))]] : []),
      ...(detail.triggeredBy ? [['started by', h('span', {}, `event ${detail.triggeredBy.eventName} of `, runLink(detail.triggeredBy.runId))]] : []),
      ...(detail.emittedEvents || []).flatMap((event) => event.deliveries.map((d) => ['emitted', h('span', {}, `${event.eventName} → ${d.repository}: `, ...(d.runIds.length > 0 ? d.runIds.map(runLink) : [d.status]))])),
    ];
    $('run-meta').replaceChildren(...fields.map(([name, value]) => h('div', { class: 'field' }, h('dt', {}, name), h('dd', { 'data-field': name }, value))));
    const failure = run.failure_reason || (run.init_failure && run.init_failure.message) || '';
    $('run-failure').hidden = !failure;
    $('run-failure').textContent = failure;
    const unsupported = Array.isArray(run.input_summary?.unsupported) ? run.input_summary.unsupported : [];
    $('run-unsupported').hidden = unsupported.length === 0;
    $('run-unsupported').replaceChildren(h('h3', {}, 'Not supported here'), h('ul', {}, ...unsupported.map((line) => h('li', {}, line))));
    const attestations = detail.attestations || [];
    $('run-provenance').hidden = attestations.length === 0;
    $('run-provenance').replaceChildren(
      h('h3', {}, 'Provenance'),
      h('ul', {}, ...attestations.map((a) => h('li', {}, `${a.subjectName} `, h('code', {}, `sha256:${a.subjectDigest.slice(0, 16)}…`), ` by ${a.jobKey}`))),
    );
    $('cancel-run').disabled = isFinalRun(run.status) || run.status === 'cancelling';
    $('rerun-failed').disabled = run.status !== 'failed' && run.status !== 'cancelled';
    $('statechart-link').href = `/visualize/#run=${encodeURIComponent(run.run_id)}`;
    renderWaiting(detail.jobs);
  }

  /** The answer to "why is my job waiting?", at the top of the run, one line per waiting job. */
  function renderWaiting(jobs) {
    const waiting = jobs.filter(waitingOf);
    $('run-waiting').hidden = waiting.length === 0;
    $('run-waiting').replaceChildren(
      h('h3', {}, waiting.length === 1 ? 'Why is a job waiting?' : `Why are ${waiting.length} jobs waiting?`),
      h('ul', {}, ...waiting.map((job) => h('li', { 'data-job': job.job_key }, h('strong', {}, job.job_key), ': ', reasonText(waitingOf(job))))),
    );
  }

  const reasonText = (reason) => h('span', { class: 'waiting-message', 'data-kind': reason.kind, title: reason.kind }, reason.message);

  function jobSection(container, jobKey) {
    const existing = [...container.children].find((element) => element.dataset.job === jobKey);
    if (existing) return existing;
    const section = h('section', { class: 'job', 'data-job': jobKey }, h('div', { class: 'job-header' }), h('div', { class: 'job-waiting' }), h('div', { class: 'steps' }));
    container.append(section);
    return section;
  }

  function renderJob(section, job) {
    const neverDispatched = job.status === 'skipped' ? `skipped: ${job.outcome ?? 'its needs were not met'}` : isFinalJob(job.status) ? 'never dispatched' : 'not dispatched yet';
    const facts = [
      job.attempt > 0 ? `attempt ${job.attempt}` : neverDispatched,
      job.agent_id ? `agent ${job.agent_id}` : null,
      job.queuedMs != null ? `queued ${duration(job.queuedMs)}` : null,
      job.runMs != null ? `ran ${duration(job.runMs)}` : job.duration_ms != null ? duration(Number(job.duration_ms)) : null,
      job.needs && job.needs.length > 0 ? `needs ${job.needs.join(', ')}` : null,
    ].filter(Boolean);
    const header = [
      h('h3', { class: 'job-name' }, job.job_key),
      badge(job.status),
      h('span', { class: 'job-facts' }, facts.join(' · ')),
      job.outcome && job.status !== 'skipped' ? h('span', { class: 'job-outcome' }, job.outcome) : null,
      job.init_failure ? h('span', { class: 'job-outcome' }, `${job.init_failure.category}: ${job.init_failure.message}`) : null,
    ];
    section.querySelector('.job-header').replaceChildren(...header.filter(Boolean));
    const reason = waitingOf(job);
    const waiting = section.querySelector('.job-waiting');
    waiting.replaceChildren(...(reason ? [h('strong', {}, 'Waiting: '), reasonText(reason)] : []));
    waiting.hidden = !reason;
    for (const step of job.steps || []) renderStepSummary(stepBlock(job.job_key, step.index, step.name, job.status), step);
    const steps = section.querySelector('.steps');
    if (steps.children.length === 0) steps.append(h('p', { class: 'no-steps' }));
    const placeholder = steps.querySelector('.no-steps');
    if (placeholder) placeholder.textContent = isFinalJob(job.status) ? 'no steps ran' : 'no steps yet';
  }

  /** The collapsible block of one step (or of the runner's own lines), created in step order. */
  function stepBlock(jobKey, stepIndex, stepName, jobStatus) {
    const steps = jobSection($('jobs'), jobKey).querySelector('.steps');
    const existing = steps.querySelector(`details[data-step-index="${stepIndex}"]`);
    if (existing) return existing;
    for (const placeholder of steps.querySelectorAll('.no-steps')) placeholder.remove();
    const name = stepIndex === RUNNER_STEP ? 'runner' : stepName;
    const block = h(
      'details',
      { class: 'step', 'data-step-index': stepIndex, 'data-step': name, open: !isFinalJob(jobStatus || '') },
      h('summary', {}, h('span', { class: 'step-name' }, name), h('span', { class: 'step-facts' })),
      h('pre', { class: 'log' }),
    );
    const after = [...steps.children].find((element) => Number(element.dataset.stepIndex) > stepIndex);
    steps.insertBefore(block, after || null);
    return block;
  }

  /** Status, duration, exit code and error of a step as the agent reported them. */
  function renderStepSummary(block, step) {
    const facts = [
      badge(step.status),
      step.durationMs != null ? h('span', { class: 'step-duration' }, duration(step.durationMs)) : null,
      step.exitCode != null ? h('span', { class: 'step-exit' }, `exit ${step.exitCode}`) : null,
      step.error ? h('span', { class: 'step-error' }, step.error) : null,
    ];
    block.querySelector('.step-name').textContent = step.name;
    block.dataset.step = step.name;
    block.querySelector('.step-facts').replaceChildren(...facts.filter(Boolean));
    if (step.status === 'failed' && !block.dataset.opened) {
      block.dataset.opened = 'true';
      block.open = true;
    }
  }

  function renderJobs(detail) {
    const container = $('jobs');
    const keys = new Set(detail.jobs.map((job) => job.job_key));
    for (const section of [...container.children]) if (!keys.has(section.dataset.job)) section.remove();
    // In the API's order, the pipeline's: a section out of place (made earlier, or new at the end) moves to its place.
    let next = container.firstElementChild;
    for (const job of detail.jobs) {
      const section = jobSection(container, job.job_key);
      if (section === next) next = next.nextElementSibling;
      else container.insertBefore(section, next);
      renderJob(section, job);
    }
  }

  /** Scrolls to a job's section and opens its steps (a box of the needs graph was clicked). */
  function openJob(jobKey) {
    const section = jobSection($('jobs'), jobKey);
    for (const step of section.querySelectorAll('details.step')) step.open = true;
    section.scrollIntoView({ block: 'start' });
  }

  async function renderRun(detail, now) {
    renderHeader(detail, now);
    renderJobs(detail);
    const href = (jobKey) => `#run=${encodeURIComponent(detail.run.run_id)}&job=${encodeURIComponent(jobKey)}`;
    await renderNeedsGraph($('run-graph'), detail.jobs, { href, open: openJob });
  }

  window.RunsPage = Object.assign(window.RunsPage || {}, { run: { renderRun, stepBlock } });
}
