import picomatch from 'picomatch';
import type { Kysely } from 'kysely';
import type { EnvironmentHold, EnvironmentVerdict } from '../../machines/environment.ts';
import type { LockStaticJob, LockWorkflow } from '../../machines/lock.types.ts';
import { initFlagsOf } from '../../machines/run.plan.ts';
import type { PlannedEnvironments } from '../../machines/run.plan.ts';
import { loadEnvironments } from '../db/environments.ts';
import type { EnvironmentRecord, TrustTier } from '../db/environments.ts';
import type { Schema } from '../db/schema.ts';

/** What a run keeps of an environment for its dispatches (ENV-4): never re-read after creation. */
export interface FrozenEnvironment {
  variables: Record<string, string>;
  allowLocalExecution: boolean;
}

/** The environments of one run as its source stores them: the one each job names, and their values. */
export interface RunEnvironments {
  byJob: Record<string, string>;
  values: Record<string, FrozenEnvironment>;
}

export interface ResolvedEnvironments {
  /** For planning: the name each job gives, and the verdicts on them (machines/run.plan.ts). */
  planned: PlannedEnvironments;
  /** For the run's source and its dispatches. */
  frozen: RunEnvironments;
}

/** What a run is checked by: where it comes from and how far it is trusted. */
export interface RunOrigin {
  repository: string;
  ref: string;
  /** Absent counts as `unknown`: a gate never treats a missing tier as a pass (TRUST-3, B13). */
  trustTier: TrustTier | undefined;
}

/** A security hold lasts 72 h (ENV-2). */
export const SECURITY_HOLD_MS = 72 * 60 * 60_000;
const TRUST_RANK: Readonly<Record<TrustTier, number>> = { unknown: 0, known: 1, trusted: 2 };

function staticJobs(workflow: LockWorkflow): LockStaticJob[] {
  return workflow.jobs.filter((job): job is LockStaticJob => job._type === 'static');
}

/**
 * The environment each job names in the lock file: the last non-empty name of its `environments`,
 * an inline value by its evaluated result (`inline[job][index]`). A name left to an init job
 * (`{value: "", dynamic: true}`) comes later, with the job's release.
 */
export function environmentNamesOf(workflow: LockWorkflow, inline: Record<string, Record<number, string>> = {}): Record<string, string> {
  const names: Record<string, string> = {};
  for (const job of staticJobs(workflow)) {
    const values = (job.environments ?? []).map((ref, index) => (typeof ref.value === 'string' ? ref.value : (inline[job.name]?.[index] ?? '')));
    const name = values.reverse().find((value) => value !== '');
    if (name !== undefined) names[job.name] = name;
  }
  return names;
}

/** An init job may name any environment (its result can carry a name): every one is then frozen with the run. */
function mayNameAny(workflow: LockWorkflow): boolean {
  return staticJobs(workflow).some((job) => initFlagsOf(job) !== null);
}

/** The branch a ref names (`refs/heads/x` → `x`); any other ref is matched as written. */
export function branchOf(ref: string): string {
  return ref.startsWith('refs/heads/') ? ref.slice('refs/heads/'.length) : ref;
}

/** ENV-2: what an environment decides for a run of this origin. Rules that fail win over holds. */
export function verdictOf(environment: EnvironmentRecord, origin: RunOrigin): EnvironmentVerdict {
  const { name } = environment;
  if (environment.repositories.length > 0 && !environment.repositories.includes(origin.repository)) {
    return { kind: 'fail', message: `environment ${name} is not bound to repository ${origin.repository} (bound: ${environment.repositories.join(', ')})` };
  }
  const branch = branchOf(origin.ref);
  if (environment.branches.length > 0 && !environment.branches.some((glob) => picomatch.isMatch(branch, glob, { dot: true }))) {
    return { kind: 'fail', message: `branch ${branch} does not match the branches of environment ${name} (${environment.branches.join(', ')})` };
  }
  const tier = origin.trustTier ?? 'unknown';
  if (environment.minimumTrust !== null && TRUST_RANK[tier] < TRUST_RANK[environment.minimumTrust]) {
    return hold(name, 'security', SECURITY_HOLD_MS, `trust tier ${tier} is below the minimum ${environment.minimumTrust}`);
  }
  if (environment.approvalRequired) {
    const approvers = environment.approvers ? ` (approvers: ${environment.approvers})` : '';
    return hold(name, 'approval', environment.holdExpirySeconds * 1000, `approval required${approvers}`);
  }
  return { kind: 'pass' };
}

function hold(environment: string, kind: EnvironmentHold['kind'], expiresInMs: number, why: string): EnvironmentVerdict {
  return { kind: 'hold', hold: { environment, kind, expiresInMs, why } };
}

/**
 * Resolves a run's environments at its creation (ENV-4): the one function webhook, manual and
 * test runs go through, so each dispatches the same (dispatch parity). The environments the jobs
 * name are read once; their verdicts and variables are frozen into the run.
 */
export async function resolveRunEnvironments(
  db: Kysely<Schema>,
  workflow: LockWorkflow,
  origin: RunOrigin,
  inline: Record<string, Record<number, string>> = {},
): Promise<ResolvedEnvironments> {
  const byJob = environmentNamesOf(workflow, inline);
  const named = [...new Set(Object.values(byJob))];
  const records = mayNameAny(workflow) ? await loadEnvironments(db) : await loadEnvironments(db, named);
  const verdicts: Record<string, EnvironmentVerdict> = {};
  const values: Record<string, FrozenEnvironment> = {};
  for (const record of records) {
    verdicts[record.name] = verdictOf(record, origin);
    values[record.name] = { variables: record.variables, allowLocalExecution: record.allowLocalExecution };
  }
  return { planned: { byJob, verdicts }, frozen: { byJob, values } };
}
