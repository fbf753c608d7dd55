import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import { RunNotStorableError } from '../../actors/runs/errors.ts';
import type { CarriedJob, RunInput } from '../../machines/run.types.ts';
import { isTerminalRunStatus } from '../../machines/status.ts';
import type { RunHistory } from '../retention/run-history.ts';
import { readJobResults, readRunRow } from '../db/run-queries.ts';
import type { Kysely } from 'kysely';
import type { NewRun } from '../../actors/runs/ports.ts';
import type { Schema } from '../db/schema.ts';
import { isRunSource, type RunSource } from '../pipeline/run-source.ts';
import { HttpError, parseBody, readJson, sendJson } from './respond.ts';
import type { RouteContext } from './router.ts';

/** What a rerun needs: the run's stored rows, and the runtime's `createRun`. */
export interface RerunDeps {
  db: Kysely<Schema>;
  createRun: (run: NewRun) => Promise<void>;
  now: () => number;
  /** Where the ended run's journal (its frozen input) is read, archived or not. */
  history: RunHistory;
}

/** A rerun's source: the original's, with the run it repeats. */
export type RerunSource = RunSource & { rerunOf?: string };

const rerunSchema = z.object({ failedOnly: z.boolean().default(false) }).strict();

/** The run a rerun repeats, as its stored source names it; null for a run that is no rerun. */
export function rerunOf(inputSummary: unknown): string | null {
  if (typeof inputSummary !== 'object' || inputSummary === null || !('rerunOf' in inputSummary)) return null;
  return typeof inputSummary.rerunOf === 'string' ? inputSummary.rerunOf : null;
}

/**
 * `POST /api/v1/runs/:id/rerun` (RUN-5): a new run from the ended run's frozen input and source, under
 * a new id, created as `POST /api/v1/runs` creates one; its source records `rerunOf`. With
 * `{failedOnly: true}` the jobs that succeeded are carried over as succeeded (docs/http-api.md#rerun).
 */
export async function rerunRunRoute(deps: RerunDeps, { req, res, params }: RouteContext) {
  const runId = params['id'] ?? '';
  const body = parseBody(rerunSchema, await readJson(req, 64 * 1024));
  const row = await readRunRow(deps.db, runId);
  if (!row) throw new HttpError(404, 'not found', `no run ${runId}`);
  if (!isTerminalRunStatus(row.status)) {
    throw new HttpError(409, 'run not finished', `run ${runId} is still ${row.status}; wait for it to end or cancel it, then rerun`);
  }
  const source = row.input_summary;
  const frozen = await deps.history.createdInput(runId);
  if (!isRunSource(source) || !isRunInput(frozen)) throw new HttpError(409, 'not rerunnable', `run ${runId} has no stored input to rerun`);
  const { carried: _earlier, ...whole } = frozen;
  const carried = body.failedOnly ? await carriedJobs(deps.db, runId, frozen) : null;
  const input: RunInput = { ...whole, runId: randomUUID(), createdAt: deps.now(), ...(carried && { carried }) };
  const inputSummary: RerunSource = { ...source, rerunOf: runId };
  try {
    await deps.createRun({ input, repository: row.repository, inputSummary });
  } catch (thrown) {
    if (thrown instanceof RunNotStorableError) throw new HttpError(422, 'run not storable', thrown.message);
    throw thrown;
  }
  const jobs = input.jobs.map((job) => job.key);
  const carriedKeys = Object.keys(carried ?? {});
  const rerun = jobs.filter((key) => !carriedKeys.includes(key));
  sendJson(res, 201, { runId: input.runId, rerunOf: runId, originalRunId: runId, failedOnly: body.failedOnly, jobs, rerunJobs: rerun, carriedJobs: carriedKeys });
}

/** Job statuses a failed-only rerun runs again (with everything downstream of them). */
const RERUN_STATUSES: ReadonlySet<string> = new Set(['failed', 'cancelled', 'timed_out_stale', 'drift_dropped']);

/**
 * The jobs a failed-only rerun keeps (docs/http-api.md#rerun): those that ended `success`, with
 * their outputs. Init jobs and dynamic-matrix jobs run again, since their results are not kept.
 * 409 when no job failed or was cancelled.
 */
async function carriedJobs(db: Kysely<Schema>, runId: string, frozen: RunInput): Promise<Record<string, CarriedJob>> {
  const ended = await readJobResults(db, runId);
  if (!ended.some((job) => RERUN_STATUSES.has(job.status))) {
    throw new HttpError(409, 'nothing to rerun', `run ${runId} has no failed or cancelled job; rerun the whole run instead`);
  }
  const byKey = new Map(ended.map((job) => [job.jobKey, job]));
  const carried: Record<string, CarriedJob> = {};
  for (const plan of frozen.jobs) {
    const job = byKey.get(plan.key);
    const usesInit = plan.template === true || plan.initFor !== undefined || plan.initJob !== undefined;
    if (job?.status !== 'success' || usesInit) continue;
    carried[plan.key] = { fromRun: runId, ...(job.outputs && { outputs: job.outputs }) };
  }
  return carried;
}

/** The supervisor journals the input it was given; a shape check guards against a foreign row. */
function isRunInput(value: unknown): value is RunInput {
  if (typeof value !== 'object' || value === null) return false;
  const input = value as Partial<Record<keyof RunInput, unknown>>;
  return typeof input.runId === 'string' && typeof input.workflowName === 'string' && Array.isArray(input.jobs);
}
