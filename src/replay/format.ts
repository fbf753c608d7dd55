import type { JsonDifference } from './compare.ts';
import { stateText } from './step.ts';
import type { ReplayReport, ReplayStep, StateSummary } from './types.ts';

const MAX_EVENT_TEXT = 160;

function iso(ms: number): string {
  return Number.isFinite(ms) ? new Date(ms).toISOString() : String(ms);
}

function json(value: unknown): string {
  return JSON.stringify(value) ?? 'undefined';
}

function eventText(event: Record<string, unknown>): string {
  const text = Object.entries(event)
    .map(([key, value]) => `${key}=${typeof value === 'string' ? value : json(value)}`)
    .join(' ');
  return text.length > MAX_EVENT_TEXT ? `${text.slice(0, MAX_EVENT_TEXT - 1)}…` : text;
}

function transition(before: unknown, after: unknown): string {
  const from = before === undefined ? '(none)' : stateText(before);
  const to = after === undefined ? '(gone)' : stateText(after);
  return from === to ? to : `${from} → ${to}`;
}

/** The run line always; a job line only when the job changed (every job at seq 0). */
function stateLines(before: StateSummary | null, after: StateSummary): string[] {
  const lines = [`  run      ${transition(before ? before.run : undefined, after.run)}`];
  const keys = new Set([...Object.keys(before?.jobs ?? {}), ...Object.keys(after.jobs)]);
  for (const key of keys) {
    const from = before?.jobs[key];
    const to = after.jobs[key];
    if (before && json(from) === json(to)) continue;
    lines.push(`  job ${key}  ${transition(before ? from : undefined, to)}`);
  }
  return lines;
}

function differenceLines(differences: JsonDifference[], indent: string): string[] {
  return differences.map((d) => `${indent}${d.path}: recorded ${json(d.expected)}, replayed ${json(d.actual)}`);
}

/** One step as the CLI prints it. */
export function formatStep(step: ReplayStep): string {
  const lines = [`seq ${step.seq}  ${iso(step.at)}  ${step.type}  ${eventText(step.event)}`.trimEnd(), ...stateLines(step.before, step.after)];
  for (const intent of step.intents) lines.push(`  intent   ${intent.type} ${json(intent.params)}`);
  if (step.deadlines.fired) lines.push(`  fired    ${step.deadlines.fired}`);
  for (const armed of step.deadlines.armed) lines.push(`  armed    ${armed.id} (${armed.kind}) due ${iso(armed.at)}`);
  for (const id of step.deadlines.disarmed) lines.push(`  disarmed ${id}`);
  for (const [key, reason] of Object.entries(step.waiting)) lines.push(`  waiting  ${key}: ${reason.message} (${reason.kind})`);
  if (!step.matches) {
    lines.push('  !! DIVERGED: the journal recorded a different state after this event');
    lines.push(`     recorded ${json(step.expected)}`, `     replayed ${json(step.after)}`);
  }
  return lines.join('\n');
}

/** The closing lines: what was replayed, the first divergence, the end-state check. */
export function formatSummary(report: ReplayReport): string {
  const { machine } = report;
  const recorded = machine.recorded ? `recorded with ${machine.recorded.machineId} v${machine.recorded.machineVersion}` : 'no stored snapshot';
  const lines = [
    `replayed run ${report.runId}, seq 0..${report.to} of 0..${report.lastSeq}, with ${machine.id} v${machine.version} (${recorded}${machine.forced ? ', forced' : ''})`,
  ];
  if (report.failure) lines.push(`FAILED at seq ${report.failure.seq}: the actor threw: ${report.failure.message}`);
  if (report.divergence) {
    const d = report.divergence;
    lines.push(`DIVERGED first at seq ${d.seq} (${d.eventType}):`, ...differenceLines(d.differences, '  '));
  }
  const check = report.snapshotCheck;
  if (!check.compared) lines.push(`state not compared with the stored snapshot: ${check.reason}`);
  else if (check.equal) lines.push(`state at seq ${check.seq} equals the stored snapshot (value, context, children)`);
  else lines.push(`STATE AT SEQ ${check.seq} DIFFERS from the stored snapshot:`, ...differenceLines(check.differences, '  '));
  lines.push(report.exact ? 'result: exact' : 'result: NOT exact');
  return lines.join('\n');
}

export function formatReport(report: ReplayReport): string {
  return [...report.steps.map(formatStep), '', formatSummary(report), ''].join('\n');
}
