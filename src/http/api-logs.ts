import type { Kysely } from 'kysely';
import { DEFAULT_LOG_CHUNK_LIMIT, inWrittenOrder, type StoredLogChunk } from '../db/job-logs.ts';
import type { RunHistory } from '../retention/run-history.ts';
import { readStepSources, runExists } from '../db/run-queries.ts';
import type { Schema } from '../db/schema.ts';
import { HttpError, sendJson, sendText } from './respond.ts';
import { stepNamer } from './step-names.ts';
import type { RouteContext, Router } from './router.ts';

export interface LogApiDeps {
  db: Kysely<Schema>;
  /** Where each run's log chunks are read, archived or not. */
  history: RunHistory;
}

const MAX_CHUNK_LIMIT = 10_000;

/** Job logs (docs/http-api.md#routes): JSON chunks, or plain text lines with `Accept: text/plain`. */
export function registerLogRoutes(router: Router, deps: LogApiDeps): void {
  router
    .on('GET', '/api/v1/runs/:id/logs', (ctx) => logsRoute(deps, ctx, ctx.url.searchParams.get('job') ?? undefined))
    .on('GET', '/api/v1/runs/:id/jobs/:job/logs', (ctx) => logsRoute(deps, ctx, ctx.params['job'] ?? ''));
}

/**
 * A run's log chunks, each with the name of its step; `?step=` takes an index or a step name. JSON
 * chunks come in arrival (id) order, so that the last one's id pages on (`next` is that id); each
 * carries the agent's `sentAt`. Text lines come in the order they were written (see inWrittenOrder).
 */
async function logsRoute(deps: LogApiDeps, { req, res, params, url }: RouteContext, jobKey: string | undefined) {
  const runId = params['id'] ?? '';
  const step = stepFilter(url);
  const afterId = optionalInteger(url, 'after', 0, Number.MAX_SAFE_INTEGER);
  const limit = optionalInteger(url, 'limit', 1, MAX_CHUNK_LIMIT) ?? DEFAULT_LOG_CHUNK_LIMIT;
  if (!(await runExists(deps.db, runId))) throw new HttpError(404, 'not found', `no run ${runId}`);
  const stepIndex = typeof step === 'number' ? step : undefined;
  const nameOf = stepNamer(await readStepSources(deps.db, runId));
  const page = await deps.history.logs({ runId, jobKey, stepIndex, afterId, limit });
  const named = page.map((chunk) => ({ ...chunk, stepName: nameOf(chunk.jobKey, chunk.stepIndex) }));
  const chunks = typeof step === 'string' ? named.filter((chunk) => chunk.stepName === step) : named;
  if (wantsText(req.headers.accept)) sendText(res, 200, 'text/plain; charset=utf-8', asText(inWrittenOrder(chunks)));
  else sendJson(res, 200, { runId, next: page.at(-1)?.id ?? afterId ?? 0, chunks });
}

/** `?step=` as an index (an integer from -1) or a step name; a number that is no index is refused. */
function stepFilter(url: URL): number | string | undefined {
  const raw = url.searchParams.get('step');
  if (raw === null || raw === '') return undefined;
  if (/^[-+\d.]+$/.test(raw)) return optionalInteger(url, 'step', -1, Number.MAX_SAFE_INTEGER);
  return raw;
}

/** A query parameter as an integer in [min, max], undefined when absent, 400 otherwise. */
function optionalInteger(url: URL, name: string, min: number, max: number): number | undefined {
  const raw = url.searchParams.get(name);
  if (raw === null || raw === '') return undefined;
  const value = Number(raw);
  if (!/^-?\d+$/.test(raw) || value < min || value > max) {
    throw new HttpError(400, 'invalid request', `${name}: expected an integer from ${min} to ${max}, got "${raw}"`);
  }
  return value;
}

function wantsText(accept: string | undefined): boolean {
  return accept !== undefined && /\btext\/plain\b/i.test(accept) && !/\bapplication\/json\b/i.test(accept);
}

function asText(chunks: readonly (StoredLogChunk & { stepName: string })[]): string {
  let text = '';
  for (const chunk of chunks) {
    const prefix = `[${chunk.jobKey} › ${chunk.stepName}] `;
    for (const line of chunk.lines) text += `${prefix}${line}\n`;
  }
  return text;
}
