import type { ConcurrencyPolicy } from './types.ts';

/**
 * A workflow's own concurrency group (CONC-1, CONC-7): the stock agent evaluates the workflow's
 * group function in each job and asks with `job.concurrency.report`; the holder is the run. The run
 * asks the group's arbiter once per key and answers every report of its jobs: `proceed` once it
 * holds the key, `wait` while it is queued (and `proceed` later, with the same request id), `cancel`
 * once the run is cancelled.
 */
export interface WorkflowGroup {
  state: 'asked' | 'queued' | 'held';
  /** Place in the group's queue while queued (1 = next). */
  position: number | null;
  /** Reports not yet told to proceed; `told` is what each already heard. */
  reports: GroupReport[];
}

export interface GroupReport {
  requestId: string;
  agentId: string;
  dispatchId: string;
  jobKey: string;
  told: 'nothing' | 'wait';
}

export type GroupAnswer = 'proceed' | 'wait' | 'cancel';

/** What the run records: the arbiter asked or released (`jobKey` null: the run holds), an agent answered. */
export type GroupIntent =
  | { type: 'requestConcurrency'; params: { jobKey: null; key: string; policy: ConcurrencyPolicy } }
  | { type: 'releaseConcurrency'; params: { jobKey: null; key: string } }
  | { type: 'answerConcurrency'; params: { agentId: string; dispatchId: string; requestId: string; action: GroupAnswer; reason?: string } };

export type WorkflowGroups = Record<string, WorkflowGroup>;

/** A run without a frozen scope (made before scopes existed) gets the SDK's defaults (CONC-2). */
export const DEFAULT_GROUP_POLICY: ConcurrencyPolicy = { cancelInProgress: true, max: 1 };

export interface ReportEvent {
  jobKey: string;
  agentId: string;
  dispatchId: string;
  requestId: string;
  group: string;
}

interface Step {
  groups: WorkflowGroups;
  intents: GroupIntent[];
}

/** The scoped key of a reported group: `<repository>::<group>` (CONC-1). */
export function groupKeyOf(repository: string, group: string): string {
  return `${repository}::${group}`;
}

function answer(report: Pick<GroupReport, 'agentId' | 'dispatchId' | 'requestId'>, action: GroupAnswer, reason?: string): GroupIntent {
  const { agentId, dispatchId, requestId } = report;
  return { type: 'answerConcurrency', params: { agentId, dispatchId, requestId, action, ...(reason === undefined ? {} : { reason }) } };
}

function queuedReason(key: string, position: number | null): string {
  return `waiting for concurrency group ${key}${position === null ? '' : ` (position ${position})`}`;
}

/** A job of an open run reports its group: the run asks for the key once, and answers as far as it knows. */
export function reported(groups: WorkflowGroups, event: ReportEvent, repository: string, policy: ConcurrencyPolicy): Step {
  const key = groupKeyOf(repository, event.group);
  const group = groups[key];
  const report: GroupReport = { requestId: event.requestId, agentId: event.agentId, dispatchId: event.dispatchId, jobKey: event.jobKey, told: 'nothing' };
  if (!group) {
    return { groups: { ...groups, [key]: { state: 'asked', position: null, reports: [report] } }, intents: [{ type: 'requestConcurrency', params: { jobKey: null, key, policy } }] };
  }
  if (group.state === 'held') return { groups, intents: [answer(report, 'proceed')] };
  if (group.state === 'queued') {
    return { groups: { ...groups, [key]: { ...group, reports: [...group.reports, { ...report, told: 'wait' }] } }, intents: [answer(report, 'wait', queuedReason(key, group.position))] };
  }
  return { groups: { ...groups, [key]: { ...group, reports: [...group.reports, report] } }, intents: [] };
}

/** The arbiter granted the key: every report waiting on it proceeds. */
export function granted(groups: WorkflowGroups, key: string): Step {
  const group = groups[key];
  if (!group) return { groups, intents: [] };
  return { groups: { ...groups, [key]: { state: 'held', position: null, reports: [] } }, intents: group.reports.map((report) => answer(report, 'proceed')) };
}

/** The arbiter queued the run: reports not answered yet are told to wait. */
export function queued(groups: WorkflowGroups, key: string, position: number): Step {
  const group = groups[key];
  if (!group || group.state === 'held') return { groups, intents: [] };
  const reason = queuedReason(key, position);
  const intents = group.reports.filter((report) => report.told === 'nothing').map((report) => answer(report, 'wait', reason));
  const reports = group.reports.map((report) => ({ ...report, told: 'wait' as const }));
  return { groups: { ...groups, [key]: { state: 'queued', position, reports } }, intents };
}

/** The run is cancelled: every report still waiting for a key is told to stop. */
export function cancelled(groups: WorkflowGroups, reason: string): Step {
  const intents = Object.values(groups).flatMap((group) => group.reports.map((report) => answer(report, 'cancel', reason)));
  const cleared = Object.fromEntries(Object.entries(groups).map(([key, group]) => [key, { ...group, reports: [] }]));
  return { groups: cleared, intents };
}

/** A report while the run is cancelling or over: the job is told to stop at once. */
export function refused(event: ReportEvent, reason: string): GroupIntent {
  return answer(event, 'cancel', reason);
}

/** One event of the workflow's groups: a job's report (scoped by the run's repository and policy), or the arbiter's answer. */
export function stepWorkflowGroups(
  groups: WorkflowGroups,
  event: ({ type: 'agent.concurrency.report' } & ReportEvent) | { type: 'run.concurrency.granted'; key: string } | { type: 'run.concurrency.queued'; key: string; position: number },
  scope: { repository: string; policy: ConcurrencyPolicy } | null,
): Step {
  switch (event.type) {
    case 'agent.concurrency.report':
      return reported(groups, event, scope?.repository ?? '', scope?.policy ?? DEFAULT_GROUP_POLICY);
    case 'run.concurrency.granted':
      return granted(groups, event.key);
    case 'run.concurrency.queued':
      return queued(groups, event.key, event.position);
  }
}

/** The run ended: every key it held or waited for goes back to its group (CONC-6). */
export function released(groups: WorkflowGroups): GroupIntent[] {
  return Object.keys(groups).map((key) => ({ type: 'releaseConcurrency', params: { jobKey: null, key } }));
}
