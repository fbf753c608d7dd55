import { z } from 'zod';
import { getRunWithJobs } from '../db/run-queries.ts';
import { appendAudit, listSecrets, secretOutputsOf } from '../db/secrets.ts';
import { DecryptError } from '../secrets/crypto.ts';
import { SECRET_KEY, formatScope, parseScope } from '../secrets/scopes.ts';
import { MAX_SECRET_BYTES, SecretsUnavailableError } from '../secrets/service.ts';
import type { SecretService } from '../secrets/service.ts';
import { MASK } from '../security/redact.ts';
import { HttpError, parseBody, readJson, sendJson } from './respond.ts';
import type { RouteContext, Router } from './router.ts';

export interface SecretApiDeps {
  secrets: SecretService;
}

/** A body may carry a value of 64 KiB escaped as JSON; the value itself is checked after parsing. */
const MAX_BODY = 8 * MAX_SECRET_BYTES;
const putSchema = z.object({ value: z.string({ message: 'value must be a string' }) }).strict();
const ACTOR = 'admin';

/**
 * Secrets (docs/http-api.md#secrets): values go in and never come out; listings carry names,
 * scopes and times only. The scope is one path segment (percent-encoded: `repo%3Aacme%2Fapp`), or
 * spelled out over up to three segments (`repo:acme/app/env:prod`).
 */
export function registerSecretRoutes(router: Router, deps: SecretApiDeps): void {
  const scoped = ['/:s1/:key', '/:s1/:s2/:key', '/:s1/:s2/:s3/:key'];
  router
    .on('GET', '/api/v1/secrets', async ({ res }) => sendJson(res, 200, { secrets: await listSecrets(deps.secrets.db) }))
    .on('POST', '/api/v1/secrets/rotate-key', async ({ res }) => {
      const counts = await guard(() => deps.secrets.rotate(ACTOR));
      sendJson(res, 200, { rotated: counts });
    })
    .on('GET', '/api/v1/runs/:id/secret-outputs', (ctx) => secretOutputsRoute(deps, ctx));
  for (const path of scoped) {
    router.on('PUT', `/api/v1/secrets${path}`, (ctx) => putRoute(deps, ctx)).on('DELETE', `/api/v1/secrets${path}`, (ctx) => deleteRoute(deps, ctx));
  }
}

function scopeAndKey(params: Record<string, string>): { scope: string; key: string } {
  const text = [params['s1'], params['s2'], params['s3']].filter((part) => part !== undefined).join('/');
  const scope = parseScope(text);
  if ('error' in scope) throw new HttpError(400, 'invalid scope', scope.error);
  const key = params['key'] ?? '';
  if (!SECRET_KEY.test(key)) throw new HttpError(400, 'invalid key', `secret key ${JSON.stringify(key)} must be a variable name: a letter or _ then letters, digits or _ (at most 128)`);
  return { scope: formatScope(scope), key };
}

async function putRoute(deps: SecretApiDeps, { req, res, params }: RouteContext): Promise<void> {
  const { scope, key } = scopeAndKey(params);
  const { value } = parseBody(putSchema, await readJson(req, MAX_BODY));
  const bytes = Buffer.byteLength(value, 'utf8');
  if (bytes > MAX_SECRET_BYTES) throw new HttpError(413, 'secret too large', `the value is ${bytes} bytes; the limit is ${MAX_SECRET_BYTES} bytes`);
  if (bytes === 0) throw new HttpError(400, 'invalid request', 'value must not be empty');
  const outcome = await guard(() => deps.secrets.put(scope, key, value, ACTOR));
  sendJson(res, outcome === 'created' ? 201 : 200, { scope, key, outcome });
}

async function deleteRoute(deps: SecretApiDeps, { res, params }: RouteContext): Promise<void> {
  const { scope, key } = scopeAndKey(params);
  if (!(await deps.secrets.delete(scope, key, ACTOR))) throw new HttpError(404, 'not found', `no secret ${key} in scope ${scope}`);
  sendJson(res, 200, { scope, key, deleted: true });
}

/** SEC-5: a run's secret outputs, masked unless `?reveal=true` (each reveal is audited). */
async function secretOutputsRoute(deps: SecretApiDeps, { res, params, url }: RouteContext): Promise<void> {
  const runId = params['id'] ?? '';
  if (!(await getRunWithJobs(deps.secrets.db, runId))) throw new HttpError(404, 'not found', `no run ${runId}`);
  const reveal = url.searchParams.get('reveal') === 'true';
  if (!reveal) {
    const rows = await secretOutputsOf(deps.secrets.db, runId);
    sendJson(res, 200, { runId, revealed: false, outputs: rows.map((r) => ({ jobKey: r.jobKey, name: r.name, value: MASK, createdAt: r.createdAt })) });
    return;
  }
  const outputs = await guard(() => deps.secrets.openSecretOutputs(runId));
  const keys = outputs.map((o) => `${o.jobKey}/${o.name}`);
  await appendAudit(deps.secrets.db, { at: deps.secrets.now(), actor: ACTOR, action: 'reveal', runId, keys, outcome: 'revealed' });
  sendJson(res, 200, { runId, revealed: true, outputs });
}

/** No master key → 503; a ciphertext that does not open → 500 with the reason (never a value). */
async function guard<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (thrown) {
    if (thrown instanceof SecretsUnavailableError) throw new HttpError(503, 'secrets unavailable', thrown.message);
    if (thrown instanceof DecryptError) throw new HttpError(500, 'secret does not decrypt', thrown.message);
    throw thrown;
  }
}
