import type { RunHistory } from '../retention/run-history.ts';
import { replayRecordedRun } from '../replay/engine.ts';
import { ReplayJournalError, ReplayRangeError, ReplayRunNotFoundError, ReplayVersionError } from '../replay/errors.ts';
import { loadRecordedRun } from '../replay/load.ts';
import { HttpError, sendJson } from './respond.ts';
import type { RouteContext, Router } from './router.ts';

export interface ReplayApiDeps {
  /** Where each run's journal and snapshot are read, archived or not. */
  history: RunHistory;
}

/** `GET /api/v1/runs/:id/history` (the journal with each state_after) and `.../replay?to=N&force=true`. */
export function registerReplayRoutes(router: Router, deps: ReplayApiDeps): void {
  router
    .on('GET', '/api/v1/runs/:id/history', (ctx) => historyRoute(deps, ctx))
    .on('GET', '/api/v1/runs/:id/replay', (ctx) => replayRoute(deps, ctx));
}

async function historyRoute(deps: ReplayApiDeps, { res, params }: RouteContext): Promise<void> {
  const runId = params['id'] ?? '';
  const events = await deps.history.journal(runId);
  if (events.length === 0) throw new HttpError(404, 'not found', `run ${runId} has no journal`);
  sendJson(res, 200, { runId, lastSeq: events.length - 1, events });
}

function parseTo(url: URL): number | undefined {
  const raw = url.searchParams.get('to');
  if (raw === null || raw === '') return undefined;
  if (!/^\d+$/.test(raw)) throw new HttpError(400, 'invalid request', `to must be a sequence number, got "${raw}"`);
  return Number(raw);
}

async function replayRoute(deps: ReplayApiDeps, { res, params, url }: RouteContext): Promise<void> {
  const runId = params['id'] ?? '';
  const to = parseTo(url);
  const force = url.searchParams.get('force') === 'true' || url.searchParams.get('force') === '1';
  try {
    const recorded = await loadRecordedRun(deps.history, runId);
    sendJson(res, 200, await replayRecordedRun(recorded, { to, force }));
  } catch (thrown) {
    if (thrown instanceof ReplayRunNotFoundError) throw new HttpError(404, 'not found', thrown.message);
    if (thrown instanceof ReplayRangeError) throw new HttpError(400, 'invalid request', thrown.message);
    if (thrown instanceof ReplayVersionError || thrown instanceof ReplayJournalError) {
      throw new HttpError(409, 'cannot replay', thrown.message);
    }
    throw thrown;
  }
}
