import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import { RunNotStorableError } from '../../actors/runs/errors.ts';
import type { RunInput } from '../../machines/run.types.ts';
import { isTerminalRunStatus } from '../../machines/status.ts';
import { readCreatedRunInput } from '../db/journal.ts';
import { readRunRow } from '../db/run-queries.ts';
import type { Kysely } from 'kysely';
import type { NewRun } from '../../actors/runs/ports.ts';
import type { Schema } from '../db/schema.ts';
import { isRunSource, type RunSource } from '../pipeline/run-source.ts';
import { HttpError, readJson, sendJson } from './respond.ts';
import type { RouteContext } from './router.ts';

/** What a rerun needs: the run's stored rows, and the runtime's `createRun`. */
export interface RerunDeps {
  db: Kysely<Schema>;
  createRun: (run: NewRun) => Promise<void>;
  now: () => number;
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
 * a new id, created as `POST /api/v1/runs` creates one; its source records `rerunOf`.
 */
export async function rerunRunRoute(deps: RerunDeps, { req, res, params }: RouteContext) {
  const runId = params['id'] ?? '';
  const body = rerunSchema.safeParse(await readJson(req, 64 * 1024));
  if (!body.success) {
    const issue = body.error.issues[0];
    throw new HttpError(400, 'invalid request', `${issue?.path.join('.') || 'body'}: ${issue?.message ?? 'invalid'}`);
  }
  if (body.data.failedOnly) throw new HttpError(400, 'not supported', 'failedOnly is not supported yet; rerun the whole run');
  const row = await readRunRow(deps.db, runId);
  if (!row) throw new HttpError(404, 'not found', `no run ${runId}`);
  if (!isTerminalRunStatus(row.status)) {
    throw new HttpError(409, 'run not finished', `run ${runId} is still ${row.status}; wait for it to end or cancel it, then rerun`);
  }
  const source = row.input_summary;
  const frozen = await readCreatedRunInput(deps.db, runId);
  if (!isRunSource(source) || !isRunInput(frozen)) throw new HttpError(409, 'not rerunnable', `run ${runId} has no stored input to rerun`);
  const input: RunInput = { ...frozen, runId: randomUUID(), createdAt: deps.now() };
  const inputSummary: RerunSource = { ...source, rerunOf: runId };
  try {
    await deps.createRun({ input, repository: row.repository, inputSummary });
  } catch (thrown) {
    if (thrown instanceof RunNotStorableError) throw new HttpError(422, 'run not storable', thrown.message);
    throw thrown;
  }
  sendJson(res, 201, { runId: input.runId, rerunOf: runId, originalRunId: runId, jobs: input.jobs.map((job) => job.key) });
}

/** The supervisor journals the input it was given; a shape check guards against a foreign row. */
function isRunInput(value: unknown): value is RunInput {
  if (typeof value !== 'object' || value === null) return false;
  const input = value as Partial<Record<keyof RunInput, unknown>>;
  return typeof input.runId === 'string' && typeof input.workflowName === 'string' && Array.isArray(input.jobs);
}
