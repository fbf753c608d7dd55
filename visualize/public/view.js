'use strict';
// DOM rendering of the runs list, the job table, the timeline and the step details.
{
  const TERMINAL = new Set(['success', 'failed', 'cancelled']);

  const { h } = window.SwitchyardCommon;

  /** `assigned.running.started` for `{ assigned: { running: 'started' } }`. */
  function stateText(value) {
    if (value === undefined || value === null) return '—';
    if (typeof value === 'string') return value;
    return Object.entries(value).map(([key, inner]) => `${key}.${stateText(inner)}`).join(' | ');
  }

  function time(ms) {
    return typeof ms === 'number' ? new Date(ms).toISOString().replace('T', ' ').replace('Z', '') : '—';
  }

  function renderRuns(list, runs, selectedId, activeOnly, onSelect) {
    const shown = runs.filter((run) => !activeOnly || !TERMINAL.has(run.status));
    list.replaceChildren(
      ...shown.map((run) =>
        h(
          'li',
          { class: run.run_id === selectedId ? 'selected' : null },
          h(
            'button',
            { type: 'button', 'data-run-id': run.run_id, onclick: () => onSelect(run.run_id) },
            h('span', { class: 'workflow' }, run.workflow_name || '(unnamed)'),
            h('span', { class: `badge status-${run.status}`, 'data-status': run.status }, run.status),
            h('span', { class: 'run-id' }, run.run_id.slice(0, 8)),
            h('span', { class: 'when' }, time(Number(run.created_at))),
          ),
        ),
      ),
    );
    if (shown.length === 0) list.append(h('li', { class: 'empty' }, activeOnly ? 'no active runs' : 'no runs yet'));
  }

  /** One row per job: state at the viewed seq, and the waiting reason when it waits. */
  function renderJobs(body, rows, selectedJob, onSelect) {
    body.replaceChildren(
      ...rows.map((row) =>
        h(
          'tr',
          { class: row.key === selectedJob ? 'selected' : null, 'data-job': row.key, onclick: () => onSelect(row.key) },
          h('td', { class: 'job-key' }, row.key),
          h('td', { class: 'job-state', 'data-state': stateText(row.value) }, stateText(row.value)),
          h('td', { class: 'job-waiting' }, row.waiting ? h('span', { class: `reason reason-${row.waiting.kind}` }, `${row.waiting.kind}: ${row.waiting.message}`) : ''),
          h('td', { class: 'job-steps' }, ...row.steps.map(stepChip)),
          h('td', { class: 'job-outcome' }, row.outcome ?? ''),
          h('td', {}, row.attempt ?? '—'),
          h('td', {}, row.agent ?? '—'),
        ),
      ),
    );
  }

  /** One step as the agent reported it: name, status, duration and exit code; the error on hover. */
  function stepChip(step) {
    const details = [step.durationMs != null ? `${step.durationMs} ms` : null, step.exitCode != null ? `exit ${step.exitCode}` : null].filter(Boolean);
    const text = `${step.name} ${step.status}${details.length > 0 ? ` (${details.join(', ')})` : ''}`;
    return h('span', { class: `step step-${step.status}`, 'data-step': step.name, title: step.error || null }, text);
  }

  function renderTimeline(parts, history, seq, onSeek) {
    const last = history.length - 1;
    parts.range.max = String(Math.max(last, 0));
    parts.range.value = String(seq);
    parts.range.disabled = history.length < 2;
    const entry = history[seq];
    const type = entry ? entry.event.type : '—';
    parts.label.textContent = entry ? `seq ${seq} of ${last} · ${time(entry.receivedAt)} · ${type}` : 'no events';
    parts.label.setAttribute('data-seq', String(seq));
    parts.live.hidden = seq === last;
    const listKey = `${parts.key}:${history.length}`;
    if (parts.list.getAttribute('data-key') !== listKey) {
      parts.list.setAttribute('data-key', listKey);
      parts.list.replaceChildren(
        ...history.map((item) =>
          h(
            'li',
            { 'data-seq': item.seq, onclick: () => onSeek(item.seq) },
            h('span', { class: 'seq' }, `#${item.seq}`),
            h('span', { class: 'type' }, item.event.type),
            h('span', { class: 'when' }, time(item.receivedAt).slice(11)),
          ),
        ),
      );
    }
    const previous = parts.list.querySelector('li.selected');
    const selected = parts.list.children[seq];
    if (previous === selected) return;
    if (previous) previous.classList.remove('selected');
    if (selected) {
      selected.classList.add('selected');
      selected.scrollIntoView({ block: 'nearest' });
    }
  }

  function listOf(title, items) {
    if (items.length === 0) return null;
    return h('div', { class: 'detail-block' }, h('h4', {}, title), h('ul', {}, ...items.map((item) => h('li', {}, item))));
  }

  /** The event at the viewed seq, and what replay recorded for it (intents, deadlines, match). */
  function renderDetails(container, entry, step, replayNote) {
    if (!entry) {
      container.replaceChildren();
      return;
    }
    const { type, ...fields } = entry.event;
    const blocks = [h('h4', {}, `Event ${type}`), h('pre', { class: 'event-json' }, JSON.stringify(fields, null, 2))];
    if (step) {
      blocks.push(
        h('p', { class: step.matches ? 'match ok' : 'match diverged' }, step.matches ? 'replay matches the journal' : 'replay DIVERGES from the journal here'),
        listOf('Intents', step.intents.map((intent) => `${intent.type} ${JSON.stringify(intent.params)}`)),
        listOf('Deadlines', [
          ...(step.deadlines.fired ? [`fired ${step.deadlines.fired}`] : []),
          ...step.deadlines.armed.map((d) => `armed ${d.id} due ${time(d.at)}`),
          ...step.deadlines.disarmed.map((id) => `disarmed ${id}`),
        ]),
      );
    }
    blocks.push(h('p', { class: 'replay-note' }, replayNote));
    container.replaceChildren(...blocks.filter(Boolean));
  }

  window.Switchyard = Object.assign(window.Switchyard || {}, {
    view: { h, stateText, time, renderRuns, renderJobs, renderTimeline, renderDetails },
  });
}
