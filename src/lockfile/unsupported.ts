import type { LockJob, LockStep, LockWorkflow } from '../../machines/lock.types.ts';

/**
 * What a workflow asks for that Switchyard accepts but does not do (docs/lockfile.md#accepted-but-not-supported),
 * one line each, as the run shows it (API `run.input_summary.unsupported`, `switchyard run`, the runs page):
 * a field is never ignored without a word. Parts that fail their job with a reason (generators,
 * `runsOnAll`) say so on that job and are not repeated here.
 */
export function unsupportedParts(workflow: LockWorkflow): string[] {
  const notes: string[] = [];
  const fields = workflow as unknown as Record<string, unknown>;
  for (const [field, what] of WORKFLOW_FIELDS) if (present(fields[field])) notes.push(`workflow ${workflow.name}: \`${field}\` ${what}`);
  const hooks = WORKFLOW_HOOKS.filter(([flag]) => present(fields[flag])).map(([, hook]) => hook);
  if (hooks.length > 0) notes.push(`workflow ${workflow.name}: its ${hooks.join(', ')} ${hooks.length === 1 ? 'hook is' : 'hooks are'} not run here`);
  for (const job of workflow.jobs) notes.push(...jobNotes(job));
  return notes;
}

const IGNORED = 'is not supported here and was ignored';

/** Job-level `rules` go to the agent with the dispatch; a workflow's own do not. */
const WORKFLOW_FIELDS: readonly [string, string][] = [['rules', `${IGNORED} (a job's own rules are sent to its agent)`]];

const WORKFLOW_HOOKS: readonly [string, string][] = [
  ['hasOnSuccess', 'onSuccess'],
  ['hasOnFailure', 'onFailure'],
  ['hasOnCancel', 'onCancel'],
  ['hasCleanup', 'cleanup'],
];

const JOB_FIELDS: readonly [string, string][] = [
  ['approval', `${IGNORED}: the job is not held (an environment with required reviewers holds it)`],
  ['container', `${IGNORED}: steps run on the agent's host (a container scaler backend runs the whole agent in one)`],
  ['resources', `${IGNORED} (a scaler backend's label set gives an agent its resources)`],
  ['cache', `${IGNORED} (declarative caches)`],
  ['init', IGNORED],
];

function jobNotes(job: LockJob): string[] {
  if (job._type !== 'static') return [];
  const fields = job as unknown as Record<string, unknown>;
  const notes = JOB_FIELDS.filter(([field]) => present(fields[field])).map(([field, what]) => `job ${job.name}: \`${field}\` ${what}`);
  const groups = [...(job.dependsOnGroups ?? []), ...job.needs.flatMap((need) => (typeof need === 'object' && 'group' in need ? [need.group] : []))];
  if (groups.length > 0) notes.push(`job ${job.name}: needs on ${[...new Set(groups)].map((g) => `group ${g}`).join(', ')} are treated as met (generators are not run here)`);
  for (const step of stepsOf(job.steps)) {
    if (present((step as unknown as Record<string, unknown>)['approval'])) notes.push(`job ${job.name}, step ${step.name}: step approvals are not supported here; the stock agent's request is rejected`);
  }
  return notes;
}

function stepsOf(steps: readonly LockStep[]): { name: string }[] {
  return steps.flatMap((step) => (step.kind === 'parallel' ? step.children : [step]));
}

function present(value: unknown): boolean {
  if (value === undefined || value === null || value === false) return false;
  if (Array.isArray(value)) return value.length > 0;
  return true;
}
