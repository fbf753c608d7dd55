'use strict';
// Small DOM and formatting helpers shared by the runs list and the run view.
{
  const FINAL_RUN = new Set(['success', 'failed', 'cancelled']);
  const FINAL_JOB = new Set(['success', 'failed', 'cancelled', 'skipped', 'timed_out_stale', 'drift_dropped']);

  const { h } = window.SwitchyardCommon;

  function badge(status) {
    return h('span', { class: `badge status-${status}`, 'data-status': status }, status.replace('_', ' '));
  }

  /** `12 s`, `4 min 3 s`, `2 h 5 min`. */
  function duration(ms) {
    if (typeof ms !== 'number' || !Number.isFinite(ms)) return '';
    if (ms < 1000) return `${Math.round(ms)} ms`;
    const s = Math.floor(ms / 1000);
    if (s < 60) return `${s} s`;
    if (s < 3600) return `${Math.floor(s / 60)} min ${s % 60} s`;
    return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
  }

  function age(at, now) {
    const ms = now - Number(at);
    if (!Number.isFinite(ms)) return '—';
    if (ms < 60_000) return `${Math.max(0, Math.floor(ms / 1000))} s ago`;
    if (ms < 3_600_000) return `${Math.floor(ms / 60_000)} min ago`;
    if (ms < 86_400_000) return `${Math.floor(ms / 3_600_000)} h ago`;
    return `${Math.floor(ms / 86_400_000)} d ago`;
  }

  function clock(at) {
    const ms = Number(at);
    return at !== null && at !== undefined && Number.isFinite(ms) ? new Date(ms).toISOString().replace('T', ' ').replace(/\.\d+Z$/, ' UTC') : '—';
  }

  /** What a run was started from, read from its frozen source (the run row's input summary). */
  function sourceOf(run) {
    const summary = run.input_summary || {};
    const event = summary.event || null;
    const trigger = event ? (event.action ? `${event.type}.${event.action}` : event.type) : summary.provider === 'api' ? 'manual' : '—';
    const rerunOf = typeof summary.rerunOf === 'string' ? summary.rerunOf : null;
    return { ref: summary.ref || '', branch: branchOf(summary.ref || ''), sha: summary.sha || '', trigger: rerunOf ? `${trigger} (rerun)` : trigger, rerunOf, baseRead: baseReadOf(summary) };
  }

  /** A pull request run from its base commit's lock file (TRUST-4): why its own workflow changes did not run. */
  function baseReadOf(summary) {
    if (summary.lockFileSource !== 'base') return null;
    const ignored = summary.workflowChangesIgnored === true ? '; its workflow changes were not run' : '';
    return `base commit (sender ${summary.trustTier || 'unknown'})${ignored}`;
  }

  function branchOf(ref) {
    if (ref.startsWith('refs/heads/')) return ref.slice('refs/heads/'.length);
    if (ref.startsWith('refs/tags/')) return `tag ${ref.slice('refs/tags/'.length)}`;
    const pull = /^refs\/pull\/(\d+)\//.exec(ref);
    return pull ? `PR #${pull[1]}` : ref;
  }

  /** The commit's first line and author, or who started the run by hand; '' when neither is known. */
  function originOf(run) {
    if (run.commit) return [run.commit.message, run.commit.author ? `(${run.commit.author})` : null].filter(Boolean).join(' ');
    return run.startedBy ? `started by ${run.startedBy}` : '';
  }

  const shortSha = (sha) => (/^[0-9a-f]{40}$/i.test(sha) ? sha.slice(0, 7) : sha);

  window.RunsPage = Object.assign(window.RunsPage || {}, {
    dom: { h, badge, duration, age, clock, sourceOf, shortSha, originOf, isFinalRun: (s) => FINAL_RUN.has(s), isFinalJob: (s) => FINAL_JOB.has(s) },
  });
}
