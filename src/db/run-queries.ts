import type { Kysely } from 'kysely';
import type { Schema } from './schema.ts';

/**
 * Read-only queries over the projections the supervisor writes (STAT-4). Lists read in a total order
 * and continue after a sort key (`after`), reading `limit` rows (docs/http-api.md#pagination).
 */
export async function listRuns(db: Kysely<Schema>, filter: { status?: string; workflow?: string; repository?: string; limit: number; after?: [number, string] | null }) {
  let query = db.selectFrom('runs').selectAll().orderBy('created_at', 'desc').orderBy('run_id', 'desc').limit(filter.limit);
  const after = filter.after;
  if (after) query = query.where((eb) => eb(eb.refTuple('created_at', 'run_id'), '<', eb.tuple(after[0], after[1])));
  if (filter.status) query = query.where('status', '=', filter.status);
  if (filter.repository) query = query.where('repository', '=', filter.repository);
  if (filter.workflow) query = query.where('workflow_name', '=', filter.workflow);
  return query.execute();
}

/** The run's row alone: its status, repository and frozen source. */
export async function readRunRow(db: Kysely<Schema>, runId: string) {
  return (await db.selectFrom('runs').selectAll().where('run_id', '=', runId).executeTakeFirst()) ?? null;
}

export async function runExists(db: Kysely<Schema>, runId: string): Promise<boolean> {
  return (await db.selectFrom('runs').select('run_id').where('run_id', '=', runId).executeTakeFirst()) !== undefined;
}

export async function getRunWithJobs(db: Kysely<Schema>, runId: string) {
  const run = await db.selectFrom('runs').selectAll().where('run_id', '=', runId).executeTakeFirst();
  if (!run) return null;
  const jobs = await db.selectFrom('jobs').selectAll().where('run_id', '=', runId).orderBy('job_key').execute();
  const owner = await db.selectFrom('run_owner').selectAll().where('run_id', '=', runId).executeTakeFirst();
  return { run, jobs, owner: owner ?? null };
}

/** Each job's status and outputs as the projection holds them (a failed-only rerun keeps the successful ones). */
export async function readJobResults(db: Kysely<Schema>, runId: string): Promise<{ jobKey: string; status: string; outputs: Record<string, unknown> | null }[]> {
  const rows = await db.selectFrom('jobs').select(['job_key', 'status', 'outputs']).where('run_id', '=', runId).execute();
  return rows.map((row) => ({ jobKey: row.job_key, status: row.status, outputs: isRecord(row.outputs) ? row.outputs : null }));
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

export async function listJobsByStatus(db: Kysely<Schema>, status: string, limit: number, after: [number, string, string] | null = null) {
  let query = db.selectFrom('jobs').selectAll().where('status', '=', status).orderBy('updated_at').orderBy('run_id').orderBy('job_key').limit(limit);
  if (after) query = query.where((eb) => eb(eb.refTuple('updated_at', 'run_id', 'job_key'), '>', eb.tuple(after[0], after[1], after[2])));
  return query.execute();
}

const OPEN_ATTEMPT_STATUSES = ['queued', 'running', 'recovering', 'cancelling'];

/** An agent's attempts that are not over, as the job projection records them (agent.job.lost). */
export async function listOpenAttemptsOfAgent(db: Kysely<Schema>, agentId: string) {
  const rows = await db
    .selectFrom('jobs')
    .select(['run_id', 'job_key', 'dispatch_id'])
    .where('agent_id', '=', agentId)
    .where('status', 'in', OPEN_ATTEMPT_STATUSES)
    .where('dispatch_id', 'is not', null)
    .execute();
  return rows.flatMap((row) => (row.dispatch_id ? [{ runId: row.run_id, jobKey: row.job_key, dispatchId: row.dispatch_id }] : []));
}

/** How many open attempts each agent holds, by the job projection: the slots of agents connected elsewhere. */
export async function listOpenAttemptsByAgent(db: Kysely<Schema>, agentIds: readonly string[]): Promise<Map<string, { runId: string; jobKey: string }[]>> {
  const byAgent = new Map<string, { runId: string; jobKey: string }[]>();
  if (agentIds.length === 0) return byAgent;
  const rows = await db
    .selectFrom('jobs')
    .select(['agent_id', 'run_id', 'job_key'])
    .where('agent_id', 'in', agentIds)
    .where('status', 'in', OPEN_ATTEMPT_STATUSES)
    .orderBy('run_id')
    .orderBy('job_key')
    .execute();
  for (const row of rows) if (row.agent_id !== null) byAgent.set(row.agent_id, [...(byAgent.get(row.agent_id) ?? []), { runId: row.run_id, jobKey: row.job_key }]);
  return byAgent;
}

/** Each job's reported steps and the run's frozen source, to name log lines by step. */
export async function readStepSources(db: Kysely<Schema>, runId: string) {
  const jobs = await db.selectFrom('jobs').select(['job_key', 'steps']).where('run_id', '=', runId).execute();
  const run = await db.selectFrom('runs').select('input_summary').where('run_id', '=', runId).executeTakeFirst();
  return { jobs: jobs.map((row) => ({ jobKey: row.job_key, steps: row.steps })), inputSummary: run?.input_summary ?? null };
}

/** The runs' frozen sources (their input summaries), which dispatches are built from, by run id; a run not found is absent. */
export async function readRunInputSummaries(db: Kysely<Schema>, runIds: readonly string[]): Promise<Map<string, unknown>> {
  if (runIds.length === 0) return new Map();
  const rows = await db.selectFrom('runs').select(['run_id', 'input_summary']).where('run_id', 'in', [...runIds]).execute();
  return new Map(rows.map((row) => [row.run_id, row.input_summary]));
}

const ENDED_JOB_STATUSES = ['success', 'failed', 'cancelled', 'skipped', 'timed_out_stale', 'drift_dropped'];

/** An attempt as the job projection records it: who ran it, and since when it is over (null while open). */
export async function readAttemptOf(db: Kysely<Schema>, dispatchId: string) {
  const row = await db
    .selectFrom('jobs')
    .select(['run_id', 'job_key', 'agent_id', 'status', 'updated_at'])
    .where('dispatch_id', '=', dispatchId)
    .limit(1)
    .executeTakeFirst();
  if (!row?.agent_id) return undefined;
  const endedAt = ENDED_JOB_STATUSES.includes(row.status) ? Number(row.updated_at) : null;
  return { runId: row.run_id, jobKey: row.job_key, agentId: row.agent_id, endedAt };
}
