import type { IncomingMessage } from 'node:http';
import type { Kysely } from 'kysely';
import { z } from 'zod';
import { renewWaitingMessage } from '../../machines/environment.ts';
import { isTerminalRunStatus } from '../../machines/status.ts';
import type { WaitingReason } from '../../machines/types.ts';
import { getApprovalGate, listApprovalGates } from '../db/environments.ts';
import { readRunRow } from '../db/run-queries.ts';
import type { Schema } from '../db/schema.ts';
import { HttpError, parseBody, readJson, sendJson } from './respond.ts';
import type { RouteContext } from './router.ts';
import type { DeliveryRoute } from '../../actors/runs/event-router.ts';
import type { IncomingRunEvent } from '../../actors/runs/supervisor.ts';

/** The gate id of a workflow approval (RUN-4); every job hold has its own `env-…` id. */
export const WORKFLOW_GATE = 'workflow';
/** Who decided, when the body names nobody. */
const ACTOR_HEADER = 'x-switchyard-actor';

const decisionSchema = z
  .object({
    decision: z.enum(['approve', 'reject']),
    comment: z.string().max(1000).optional(),
    actor: z.string().min(1).max(200).optional(),
  })
  .strict();

function actorOf(req: IncomingMessage, fromBody: string | undefined): string {
  const header = req.headers[ACTOR_HEADER];
  const named = fromBody ?? (typeof header === 'string' && header.length > 0 && header.length <= 200 ? header : undefined);
  return named ?? 'admin';
}

/** A run's hold records as the API shows them (docs/http-api.md#approvals). */
export async function gatesOf(db: Kysely<Schema>, runId: string, runStatus: string) {
  const gates = (await listApprovalGates(db, runId)).map((row) => ({
    ...{ gateId: row.gate_id, jobKey: row.job_key, environment: row.environment, kind: row.kind, status: row.status, reason: row.reason },
    ...{ openedAt: Number(row.opened_at), expiresAt: Number(row.expires_at), decidedBy: row.decided_by, decidedAt: row.decided_at === null ? null : Number(row.decided_at) },
    comment: row.comment,
  }));
  const workflow = runStatus === 'held' ? [{ gateId: WORKFLOW_GATE, jobKey: null, environment: null, kind: 'workflow', status: 'pending', reason: 'workflow approval' }] : [];
  return { approvals: gates, pendingGates: [...workflow, ...gates.filter((gate) => gate.status === 'pending')] };
}

/** Job rows with a hold's "expires in" counted down to `now`. */
export function withRenewedReasons<T extends { waiting_reason: unknown }>(jobs: T[], now: number): T[] {
  return jobs.map((job) => ({ ...job, waiting_reason: renewWaitingMessage(job.waiting_reason as WaitingReason | null, now) }));
}

/** What deciding a gate needs: the gates, and the way to the run wherever its owner is. */
export interface ApprovalDeps {
  db: Kysely<Schema>;
  deliver: (runId: string, event: IncomingRunEvent) => Promise<DeliveryRoute>;
}

/**
 * `POST /api/v1/runs/:id/approvals/:gateId {decision, comment?, actor?}`: the decision goes to the run
 * as an event (journaled with who decided); approve → the job goes on to placement, reject → cancelled.
 */
export async function decideApprovalRoute(deps: ApprovalDeps, { req, res, params }: RouteContext) {
  const runId = params['id'] ?? '';
  const gateId = params['gateId'] ?? '';
  const body = parseBody(decisionSchema, await readJson(req, 64 * 1024));
  const { decision, comment } = body;
  const by = actorOf(req, body.actor);
  const run = await readRunRow(deps.db, runId);
  if (!run) throw new HttpError(404, 'not found', `no run ${runId}`);
  if (isTerminalRunStatus(run.status)) throw new HttpError(409, 'run finished', `run ${runId} ended ${run.status}; its gates can no longer be decided`);
  let route: DeliveryRoute;
  if (gateId === WORKFLOW_GATE) {
    if (run.status !== 'held') throw new HttpError(409, 'gate decided', `run ${runId} is ${run.status}, not held for a workflow approval`);
    route = await deps.deliver(runId, { type: 'run.approval', decision: decision === 'approve' ? 'approved' : 'rejected', by });
  } else {
    const gate = await getApprovalGate(deps.db, runId, gateId);
    if (!gate) throw new HttpError(404, 'not found', `run ${runId} has no gate ${gateId}`);
    if (gate.status !== 'pending') throw new HttpError(409, 'gate decided', `gate ${gateId} is already ${gate.status}${gate.decided_by ? ` (by ${gate.decided_by})` : ''}`);
    route = await deps.deliver(runId, { type: 'job.approval', jobKey: gate.job_key, gateId, decision, by, ...(comment === undefined ? {} : { comment }) });
  }
  if (route === 'dropped') throw new HttpError(409, 'run finished', `run ${runId} ended meanwhile; its gates can no longer be decided`);
  sendJson(res, 202, { runId, gateId, decision, by, deliveredTo: route === 'local' ? 'owner' : 'owner inbox' });
}
