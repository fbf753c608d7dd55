import type { RunStatus, TerminalRunStatus } from '../../machines/status.ts';
import type { StepRecord } from '../../machines/types.ts';
import type { UnreportedStepStatus } from '../http/planned-steps.ts';
import { age, duration, formatTime, oneLine, table } from './format.ts';

/** A `runs` row as `GET /api/v1/runs[/:id]` answers it. */
export interface RunRow {
  run_id: string;
  workflow_name: string | null;
  repository: string | null;
  status: string;
  created_at: number | null;
  finished_at: number | null;
  failure_reason: string | null;
  init_failure: { message?: string } | null;
  input_summary: { ref?: unknown; sha?: unknown; trustTier?: unknown; lockFileSource?: unknown; workflowChangesIgnored?: unknown; unsupported?: unknown } | null;
  /** Created → finished, or so far (absent from older coordinators). */
  durationMs?: number | null;
  /** Its number in its repository (#1, #2…); null for runs of coordinators before runs were numbered. */
  number?: number | null;
  /** The commit's first message line and author, when the event carried them; who started a run by hand. */
  commit?: { message: string | null; author: string | null } | null;
  startedBy?: string | null;
}

export interface JobRow {
  job_key: string;
  status: string;
  waiting_reason: { kind?: string; message?: string } | null;
  attempt: number;
  agent_id: string | null;
  outcome: string | null;
  init_failure: { message?: string } | null;
  /** As the agent reported them, then the lock file's steps it did not report (`not_run` once the job ended, else `pending`). */
  steps: (Omit<StepRecord, 'status'> & { status: StepRecord['status'] | UnreportedStepStatus })[] | null;
  duration_ms: number | null;
  outputs: Record<string, unknown> | null;
  /** The jobs it needs (absent from coordinators before jobs were listed in pipeline order). */
  needs?: string[];
  /** Created → dispatched, and running → ended, in ms (absent from older coordinators; null where they do not apply). */
  queuedMs?: number | null;
  runMs?: number | null;
}

export interface RunDetail {
  run: RunRow;
  jobs: JobRow[];
  owner: { coordinator_id: string } | null;
  rerunOf: string | null;
  /** Provenance bundles recorded by its jobs (absent from coordinators before they were kept). */
  attestations?: { id: number; jobKey: string; subjectName: string; subjectDigest: string }[];
  /** The emitted event that started it, and the events it emitted with the runs they started (docs/events.md). */
  triggeredBy?: { eventName: string; runId: string; jobKey: string; repository: string } | null;
  emittedEvents?: { eventName: string; jobKey: string; deliveries: { repository: string; status: string; runIds: string[]; reason: string | null }[] }[];
}

/** Every run status, checked against the union so a new one cannot be missed. */
const RUN_STATUS_NAMES: Record<RunStatus, true> = { pending: true, held: true, running: true, cancelling: true, success: true, failed: true, cancelled: true };
export const RUN_STATUSES = Object.keys(RUN_STATUS_NAMES);

const TERMINAL: Record<TerminalRunStatus, true> = { success: true, failed: true, cancelled: true };
export function isFinal(status: string): boolean {
  return Object.hasOwn(TERMINAL, status);
}

/** The branch or tag a run was started for, as its stored source names it. */
export function refOf(run: RunRow): string {
  const ref = run.input_summary?.ref;
  return typeof ref === 'string' && ref !== '' ? ref.replace(/^refs\/(heads|tags)\//, '') : '-';
}

const numberOf = (run: RunRow): string => (typeof run.number === 'number' ? `#${run.number}` : '-');

/** The commit's first line and author, or who started the run by hand. */
export function originOf(run: RunRow): string {
  if (run.commit) return [run.commit.message, run.commit.author ? `(${run.commit.author})` : null].filter(Boolean).join(' ') || '-';
  return run.startedBy ? `started by ${run.startedBy}` : '-';
}

export function renderRunList(runs: RunRow[], now = Date.now()): string {
  const rows = runs.map((run) => [
    ...[run.run_id, numberOf(run), run.repository ?? '-', run.workflow_name ?? '-', refOf(run), run.status],
    ...[typeof run.durationMs === 'number' ? duration(run.durationMs) : '-', age(run.created_at, now), oneLine(originOf(run), 60)],
  ]);
  return table([['ID', '#', 'REPOSITORY', 'WORKFLOW', 'REF', 'STATUS', 'DURATION', 'AGE', 'COMMIT'], ...rows]);
}

/** `switchyard run <id>`: the run, then each job with its waiting reason, steps and outputs. */
export function renderRunDetail(detail: RunDetail, now = Date.now()): string {
  const { run } = detail;
  const sha = typeof run.input_summary?.sha === 'string' && run.input_summary.sha !== '' ? ` (${run.input_summary.sha})` : '';
  const lines = [
    `run ${run.run_id}  ${run.status}${typeof run.number === 'number' ? `  #${run.number}` : ''}`,
    `  workflow    ${run.workflow_name ?? '-'}`,
    `  repository  ${run.repository ?? '-'} @ ${refOf(run)}${sha}`,
    `  created     ${formatTime(run.created_at, '-')} (${age(run.created_at, now)} ago)`,
  ];
  if (run.commit) lines.push(`  commit      ${originOf(run)}`);
  else if (run.startedBy) lines.push(`  started by  ${run.startedBy}`);
  if (run.finished_at !== null) lines.push(`  finished    ${formatTime(run.finished_at, '-')}`);
  if (typeof run.durationMs === 'number') lines.push(`  duration    ${duration(run.durationMs)}${run.finished_at === null ? ' so far' : ''}`);
  if (detail.rerunOf !== null) lines.push(`  rerun of    ${detail.rerunOf}`);
  if (detail.owner) lines.push(`  owner       ${detail.owner.coordinator_id}`);
  const baseRead = baseReadLine(run);
  if (baseRead) lines.push(baseRead);
  if (run.failure_reason) lines.push(`  failure     ${run.failure_reason}`);
  const unsupported = run.input_summary?.unsupported;
  if (Array.isArray(unsupported)) for (const line of unsupported) lines.push(`  not supported  ${oneLine(String(line), 200)}`);
  if (run.init_failure?.message) lines.push(`  init failed ${run.init_failure.message}`);
  lines.push(...eventLines(detail));
  for (const attestation of detail.attestations ?? []) {
    lines.push(`  provenance  ${oneLine(attestation.subjectName, 120)} sha256:${attestation.subjectDigest} (job ${attestation.jobKey}, bundle #${attestation.id})`);
  }
  for (const job of detail.jobs) lines.push('', ...renderJob(job));
  return `${lines.join('\n')}\n`;
}

/** Which emitted event started the run, and where each event it emitted went. */
function eventLines({ triggeredBy, emittedEvents }: RunDetail): string[] {
  const lines = triggeredBy ? [`  started by  event ${triggeredBy.eventName} of run ${triggeredBy.runId} (job ${triggeredBy.jobKey}, ${triggeredBy.repository})`] : [];
  for (const event of emittedEvents ?? []) {
    for (const delivery of event.deliveries) {
      const result = delivery.runIds.length > 0 ? `started ${delivery.runIds.join(', ')}` : delivery.status === 'processed' ? 'started no run' : `${delivery.status}${delivery.reason ? `: ${oneLine(delivery.reason, 120)}` : ''}`;
      lines.push(`  emitted     ${event.eventName} (job ${event.jobKey}) → ${delivery.repository}: ${result}`);
    }
  }
  return lines;
}

/** A pull request run from its base commit's lock file (TRUST-4): why its own workflow changes did not run. */
function baseReadLine(run: RunRow): string | null {
  const summary = run.input_summary;
  if (summary?.lockFileSource !== 'base') return null;
  const tier = typeof summary.trustTier === 'string' ? summary.trustTier : 'unknown';
  const ignored = summary.workflowChangesIgnored === true ? "; the pull request's workflow changes were not run" : '';
  return `  lock file   read at the base commit (sender ${tier})${ignored}`;
}

function renderJob(job: JobRow): string[] {
  const agent = job.agent_id ? `  agent ${job.agent_id}` : '';
  const took = job.runMs != null ? `ran ${duration(job.runMs)}` : duration(job.duration_ms);
  const queued = job.queuedMs != null ? `  queued ${duration(job.queuedMs)}` : '';
  const lines = [`job ${job.job_key}  ${job.status}  attempt ${job.attempt}${agent}${queued}  ${took}`];
  if (job.needs && job.needs.length > 0) lines.push(`  needs: ${job.needs.join(', ')}`);
  if (job.waiting_reason) lines.push(`  waiting: ${[job.waiting_reason.kind, job.waiting_reason.message].filter(Boolean).join(': ')}`);
  if (job.init_failure?.message) lines.push(`  init failed: ${job.init_failure.message}`);
  if (job.outcome && job.outcome !== job.status) lines.push(`  ${job.status === 'skipped' ? 'skipped' : 'outcome'}: ${oneLine(job.outcome)}`);
  const steps = job.steps ?? [];
  if (steps.length > 0) {
    const rows = steps.map((step) => [
      `  ${step.index < 0 ? '-' : step.index}`,
      step.hook ? `${step.name} (${step.hook})` : step.name,
      step.status.replace('_', ' '),
      duration(step.durationMs),
      step.exitCode === null ? '-' : String(step.exitCode),
      oneLine(step.error ?? ''),
    ]);
    lines.push(...table([['  #', 'STEP', 'STATUS', 'DURATION', 'EXIT', 'ERROR'], ...rows]).trimEnd().split('\n'));
  }
  for (const [name, value] of Object.entries(job.outputs ?? {})) lines.push(`  output ${name} = ${typeof value === 'string' ? value : JSON.stringify(value)}`);
  return lines;
}
