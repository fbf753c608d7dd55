import type { InvariantResult } from './invariants.ts';

export interface ChaosReport {
  seed: number;
  durationMs: number;
  /** Agents that could reach only coordinator B. */
  pinnedAgents: number;
  /** Deliveries sent at once in the middle of the faults. */
  burst: number;
  elapsedMs: number;
  /** From the end of the faults until every run was final. */
  settleMs: number;
  agents: number;
  deliveries: number;
  /** Webhook requests sent: duplicates and redeliveries included. */
  sends: number;
  unaccepted: number;
  faults: Record<string, number>;
  garbageCloseCodes: Record<string, number>;
  fencedExits: number;
  attempts: number;
  runStatuses: Record<string, number>;
  jobOutcomes: Record<string, number>;
  invariants: InvariantResult[];
  logDir: string;
  /** Dropped once every invariant held; kept, for reading the journals, when one did not. */
  databaseUrl: string;
}

export function chaosPassed(report: ChaosReport): boolean {
  return report.unaccepted === 0 && report.invariants.every((i) => i.ok);
}

/** The report as the console shows it: what was thrown at the cluster, then each invariant. */
export function formatReport(report: ChaosReport): string {
  const faults = Object.entries(report.faults).map(([kind, n]) => `${kind} ×${n}`).join(', ') || 'none';
  const lines = [
    `chaos: seed ${report.seed}, ${report.durationMs / 1000} s of faults, ${report.agents} agents, 2 coordinators (elapsed ${(report.elapsedMs / 1000).toFixed(1)} s, settled in ${(report.settleMs / 1000).toFixed(1)} s)`,
    `  deliveries: ${report.deliveries} (${report.sends} requests with duplicates, reordering and redeliveries; ${report.unaccepted} never accepted; a burst of ${report.burst} at once)`,
    `  agents connected only to coordinator B (serving runs owned by A through it): ${report.pinnedAgents}`,
    `  faults: ${faults}`,
    `  garbage bursts closed with: ${Object.entries(report.garbageCloseCodes).map(([code, n]) => `${code} ×${n}`).join(', ') || '—'}; fenced coordinator exits: ${report.fencedExits}`,
    `  runs: ${Object.entries(report.runStatuses).map(([status, n]) => `${status} ${n}`).join(', ')}; job attempts seen by agents: ${report.attempts}`,
    `  jobs that did not succeed: ${Object.entries(report.jobOutcomes).map(([why, n]) => `${why} ×${n}`).join('; ') || 'none'}`,
    `  logs: ${report.logDir}; database: ${report.invariants.every((i) => i.ok) ? 'dropped' : report.databaseUrl}`,
    'invariants:',
    ...report.invariants.flatMap((i) => [`  ${i.ok ? 'PASS' : 'FAIL'}  ${i.name} — ${i.checked}`, ...i.violations.map((v) => `          ${v}`)]),
  ];
  return lines.join('\n');
}
