import { randomUUID } from 'node:crypto';
import type { Kysely } from 'kysely';
import { z } from 'zod';
import { RunNotStorableError } from '../../actors/runs/errors.ts';
import type { NewRun } from '../../actors/runs/ports.ts';
import type { DeliveryRoute } from '../../actors/runs/event-router.ts';
import type { IncomingRunEvent } from '../../actors/runs/supervisor.ts';
import { planRun } from '../../machines/run.plan.ts';
import type { RunInput } from '../../machines/run.types.ts';
import { listAttestations } from '../caches/attestations.ts';
import { listEmittedEvents } from '../events/event-links.ts';
import { triggeredByOf } from '../pipeline/emitted-event.ts';
import { getRepository, type RepositoryRegistration } from '../db/repositories.ts';
import { forgeStatusFor } from '../../machines/run.forge.ts';
import { isTerminalRunStatus } from '../../machines/status.ts';
import type { JobTimeouts } from '../../machines/types.ts';
import type { RunHistory } from '../retention/run-history.ts';
import { findWorkflowProblem } from '../lockfile/checks.ts';
import { job as lockJobSchema } from '../lockfile/schema-jobs.ts';
import { getRunWithJobs, listJobsByStatus, listRuns, readRunRow, runExists } from '../db/run-queries.ts';
import { pageOf, readPage } from './pagination.ts';
import { rerunOf, rerunRunRoute } from './api-rerun.ts';
import { decideApprovalRoute, gatesOf, withRenewedReasons } from './api-approvals.ts';
import { withPlannedSteps } from './planned-steps.ts';
import { inPipelineOrder } from './pipeline-order.ts';
import { jobTimesOf, runDurationMs } from './job-times.ts';
import { runOriginOf } from './run-origin.ts';
import type { Schema } from '../db/schema.ts';
import { resolveRunEnvironments } from '../pipeline/environments.ts';
import type { RunSource } from '../pipeline/run-source.ts';
import { unsupportedParts } from '../lockfile/unsupported.ts';
import { HttpError, parseBody, readJson, sendJson } from './respond.ts';
import type { RouteContext, Router } from './router.ts';

export interface RunApiDeps {
  db: Kysely<Schema>;
  /** Creates and owns the run here. */
  createRun: (run: NewRun) => Promise<void>;
  /** Sends an event to a run wherever its owner is (the run's inbox when not here). */
  deliver: (runId: string, event: IncomingRunEvent) => Promise<DeliveryRoute>;
  timeouts: JobTimeouts;
  maxAttempts: number;
  now: () => number;
  /** A registered repository as this coordinator keeps it (read from its table when absent). */
  repository?: (name: string) => Promise<RepositoryRegistration | null>;
  /** Where each run's journal is read, archived or not. */
  history: RunHistory;
}

const MAX_BODY = 5 * 1024 * 1024;

/** The shape checked before planning; the full lock-file schema lives with the lock-file reader. */
export const manualRunSchema = z.object({
  repository: z.string().min(1).default('manual'),
  /** Where agents clone from; without it jobs run with no checkout. */
  repoUrl: z.string().min(1).optional(),
  /** The branch and commit, when the run is for one; none is invented (agents are sent `HEAD`). */
  ref: z.string().min(1).optional(),
  sha: z.string().min(1).optional(),
  /** Who started it, as the runs page and the CLI show it; an administrator by default. */
  startedBy: z.string().trim().min(1).max(100).optional(),
  workflow: z
    .object({
      name: z.string().min(1),
      jobs: z.array(lockJobSchema),
    })
    .passthrough(),
});

const cancelSchema = z.object({ force: z.boolean().default(false), reason: z.string().max(500).optional() });

export function registerRunRoutes(router: Router, deps: RunApiDeps): void {
  router
    .on('GET', '/api/v1/runs', ({ res, url }) => listRunsRoute(deps, res, url))
    .on('POST', '/api/v1/runs', (ctx) => createRunRoute(deps, ctx))
    .on('GET', '/api/v1/runs/:id', ({ res, params }) => getRunRoute(deps, res, params['id'] ?? ''))
    .on('GET', '/api/v1/runs/:id/events', async ({ res, params }) => {
      const runId = params['id'] ?? '';
      if (!(await runExists(deps.db, runId))) throw new HttpError(404, 'not found', `no run ${runId}`);
      sendJson(res, 200, { events: await deps.history.journal(runId) });
    })
    .on('POST', '/api/v1/runs/:id/cancel', (ctx) => cancelRunRoute(deps, ctx))
    .on('POST', '/api/v1/runs/:id/rerun', (ctx) => rerunRunRoute(deps, ctx))
    .on('POST', '/api/v1/runs/:id/approvals/:gateId', (ctx) => decideApprovalRoute(deps, ctx))
    .on('GET', '/api/v1/jobs', async ({ res, url }) => {
      const page = readPage<[number, string, string]>(url, ['number', 'string', 'string'], 500);
      const rows = await listJobsByStatus(deps.db, url.searchParams.get('status') ?? 'pending', page.limit + 1, page.after);
      const { items, nextCursor } = pageOf(rows, page.limit, (job) => [Number(job.updated_at), job.run_id, job.job_key]);
      sendJson(res, 200, { jobs: withRenewedReasons(items, deps.now()), nextCursor });
    });
}

async function listRunsRoute(deps: RunApiDeps, res: RouteContext['res'], url: URL) {
  const status = url.searchParams.get('status') ?? undefined;
  const workflow = url.searchParams.get('workflow') ?? undefined;
  const repository = url.searchParams.get('repository') ?? undefined;
  const page = readPage<[number, string]>(url, ['number', 'string']);
  const rows = await listRuns(deps.db, { status, workflow, repository, limit: page.limit + 1, after: page.after });
  const { items, nextCursor } = pageOf(rows, page.limit, (run) => [Number(run.created_at), run.run_id]);
  const now = deps.now();
  sendJson(res, 200, { runs: items.map((run) => ({ ...run, durationMs: runDurationMs(run, now), ...runOriginOf(run.input_summary) })), nextCursor });
}

async function getRunRoute(deps: RunApiDeps, res: RouteContext['res'], runId: string) {
  const found = await getRunWithJobs(deps.db, runId);
  if (!found) throw new HttpError(404, 'not found', `no run ${runId}`);
  const original = rerunOf(found.run.input_summary);
  // `originalRunId` is the spec's name for the link (RUN-5); `rerunOf` the one the CLI and runs page read.
  const gates = await gatesOf(deps.db, runId, found.run.status);
  const now = deps.now();
  const timed = found.jobs.map((job) => ({ ...job, ...jobTimesOf(job, now) }));
  const jobs = inPipelineOrder(withPlannedSteps(withRenewedReasons(timed, now), found.run.input_summary), found.run.input_summary);
  const [attestations, emittedEvents] = await Promise.all([listAttestations(deps.db, runId), listEmittedEvents(deps.db, runId)]);
  sendJson(res, 200, { ...found, run: { ...found.run, durationMs: runDurationMs(found.run, now), ...runOriginOf(found.run.input_summary), archived: found.run.archived_at !== null }, jobs, ...gates, rerunOf: original, originalRunId: original, attestations, emittedEvents, triggeredBy: triggeredByOf(found.run.input_summary) });
}

/** Starts a workflow by hand: the same planning and run actor as a webhook run. */
async function createRunRoute(deps: RunApiDeps, { req, res }: RouteContext) {
  const planned = await planManualRun(deps, parseBody(manualRunSchema, await readJson(req, MAX_BODY)));
  await startPlannedRun(deps, planned);
  sendJson(res, 201, { runId: planned.runId, jobs: planned.input.jobs.map((job) => job.key) });
}

export type ManualRunBody = z.infer<typeof manualRunSchema>;

export interface PlannedRun {
  runId: string;
  input: ReturnType<typeof planRun>;
  source: RunSource;
}

/** A manual run's plan and frozen source (RUN-3); a workflow that cannot be planned is a 400. */
export async function planManualRun(deps: Pick<RunApiDeps, 'db' | 'timeouts' | 'maxAttempts' | 'now' | 'repository'>, body: ManualRunBody): Promise<PlannedRun> {
  const problem = findWorkflowProblem(body.workflow);
  if (problem) throw new HttpError(400, 'invalid workflow', `${problem.path.map(String).join('.')}: ${problem.problem}`);
  const runId = randomUUID();
  // An administrator starts it: trusted (TRUST-1). Its environments resolve as a webhook run's do (ENV-4).
  const origin = { repository: body.repository, ref: body.ref ?? '', trustTier: 'trusted' as const };
  const environments = await resolveRunEnvironments(deps.db, body.workflow, origin);
  let input: RunInput;
  try {
    input = planRun({
      runId,
      createdAt: deps.now(),
      workflow: body.workflow,
      timeouts: deps.timeouts,
      maxAttempts: deps.maxAttempts,
      repository: body.repository,
      environments: environments.planned,
    });
  } catch (thrown) {
    throw new HttpError(400, 'invalid workflow', thrown instanceof Error ? thrown.message : String(thrown));
  }
  // A run on a registered GitHub repository reports its commit status like a webhook run.
  const repository = deps.repository ? await deps.repository(body.repository) : await getRepository(deps.db, body.repository);
  if (repository?.provider === 'github') input = { ...input, forgeStatus: forgeStatusFor(input.workflowName) };
  const source: RunSource = {
    repository: body.repository,
    repoUrl: body.repoUrl ?? null,
    ref: body.ref ?? '',
    sha: body.sha ?? '',
    ...(body.startedBy ? { startedBy: body.startedBy } : {}),
    ...(repository?.defaultBranch ? { defaultBranch: repository.defaultBranch } : {}),
    provider: 'api',
    event: null,
    workflow: body.workflow,
    trustTier: origin.trustTier,
    environments: environments.frozen,
  };
  const unsupported = unsupportedParts(body.workflow);
  if (unsupported.length > 0) source.unsupported = unsupported;
  return { runId, input, source };
}

/** Creates the planned run and its actor; an input that cannot be stored is a 422. */
export async function startPlannedRun(deps: Pick<RunApiDeps, 'createRun'>, planned: PlannedRun): Promise<void> {
  try {
    await deps.createRun({ input: planned.input, repository: planned.source.repository, inputSummary: planned.source });
  } catch (thrown) {
    // The run exists, failed: its input could not be stored (e.g. nested too deeply).
    if (thrown instanceof RunNotStorableError) throw new HttpError(422, 'run not storable', thrown.message);
    throw thrown;
  }
}

async function cancelRunRoute(deps: RunApiDeps, { req, res, params }: RouteContext) {
  const runId = params['id'] ?? '';
  const body = parseBody(cancelSchema, await readJson(req, 64 * 1024));
  const found = await getRunWithJobs(deps.db, runId);
  if (!found) throw new HttpError(404, 'not found', `no run ${runId}`);
  if (isTerminalRunStatus(found.run.status)) {
    sendJson(res, 200, { runId, alreadyTerminal: true, status: found.run.status });
    return;
  }
  const reason = body.reason ?? 'cancelled by an administrator';
  const route = await deps.deliver(runId, { type: 'run.cancel', reason, force: body.force, by: 'api' });
  if (route === 'dropped') {
    sendJson(res, 200, { runId, alreadyTerminal: true, status: (await readRunRow(deps.db, runId))?.status });
    return;
  }
  sendJson(res, 202, { runId, cancelling: true, force: body.force, deliveredTo: route === 'local' ? 'owner' : 'owner inbox' });
}
