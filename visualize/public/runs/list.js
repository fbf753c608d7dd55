'use strict';
// The runs list: newest first, filtered by repository (here) and status (by the API).
{
  const { h, badge, age, clock, duration, sourceOf, shortSha, originOf } = window.RunsPage.dom;
  const STATUSES = ['pending', 'held', 'running', 'cancelling', 'success', 'failed', 'cancelled'];

  function runRow(run, now) {
    const source = sourceOf(run);
    const open = () => (location.hash = `run=${encodeURIComponent(run.run_id)}`);
    return h(
      'tr',
      { 'data-run-id': run.run_id, onclick: open },
      h('td', { class: 'run-status' }, badge(run.status)),
      h('td', { class: 'run-number' }, run.number != null ? `#${run.number}` : '—'),
      h('td', { class: 'run-repository' }, run.repository || '—'),
      h('td', { class: 'run-branch', title: source.ref }, source.branch || '—'),
      h('td', { class: 'run-commit', title: source.sha }, h('code', {}, shortSha(source.sha) || '—')),
      h('td', { class: 'run-origin' }, originOf(run) || '—'),
      h('td', { class: 'run-trigger' }, source.trigger),
      h('td', { class: 'run-workflow' }, h('a', { href: `#run=${encodeURIComponent(run.run_id)}` }, run.workflow_name || '(unnamed)')),
      h('td', { class: 'run-duration' }, duration(run.durationMs) || '—'),
      h('td', { class: 'run-age', title: clock(run.created_at) }, age(run.created_at, now)),
    );
  }

  /** Keeps every repository seen so far in the filter, so choosing one does not hide the others. */
  function fillRepositories(select, runs) {
    const known = new Set([...select.options].map((option) => option.value));
    const added = [...new Set(runs.map((run) => run.repository).filter((name) => name && !known.has(name)))].sort();
    for (const name of added) select.append(h('option', { value: name }, name));
  }

  function fillStatuses(select) {
    select.replaceChildren(h('option', { value: '' }, 'all'), ...STATUSES.map((status) => h('option', { value: status }, status)));
  }

  /** Renders the rows the filters keep; `runs` is what the API answered for the status filter. */
  function renderList(parts, runs, now) {
    fillRepositories(parts.repository, runs);
    const repository = parts.repository.value;
    const shown = runs.filter((run) => !repository || run.repository === repository);
    parts.body.replaceChildren(...shown.map((run) => runRow(run, now)));
    parts.empty.hidden = shown.length > 0;
    parts.empty.textContent = runs.length === 0 && !parts.status.value && !repository ? 'No runs yet.' : 'No run matches the filters.';
  }

  window.RunsPage = Object.assign(window.RunsPage || {}, { list: { renderList, fillStatuses } });
}
