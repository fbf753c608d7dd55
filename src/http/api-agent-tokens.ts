import type { Kysely } from 'kysely';
import { z } from 'zod';
import { createAgentToken, listAgentTokens, revokeAgentToken, type AgentTokenRecord } from '../db/agent-tokens.ts';
import type { Schema } from '../db/schema.ts';
import { MAX_LIMIT, pageOf, readPage } from './pagination.ts';
import { HttpError, parseBody, readJson, sendJson } from './respond.ts';
import type { RouteContext, Router } from './router.ts';

export interface AgentTokenApiDeps {
  db: Kysely<Schema>;
  now: () => number;
  /** Kicks every live socket on the token (docs/protocol.md#tokens). Called after the revoke is stored; must not throw. */
  onRevoked: (record: AgentTokenRecord) => void;
}

const MAX_BODY = 64 * 1024;
const TEN_YEARS_IN_SECONDS = 10 * 365 * 24 * 3600;

const label = z
  .string()
  .min(1)
  .max(256)
  .regex(/^\S+$/, 'a label has no whitespace');

/** Operators mint static tokens only; ephemeral ones come from scalers. */
const createSchema = z
  .object({
    labels: z.array(label).max(256).optional(),
    mandatoryLabels: z.array(label).max(256).optional(),
    expiresInSeconds: z.number().int().positive().max(TEN_YEARS_IN_SECONDS).optional(),
    kind: z.literal('static').optional(),
  })
  .strict();

/** `GET/POST /api/v1/agent-tokens`, `DELETE /api/v1/agent-tokens/:id` (docs/http-api.md#routes). */
export function registerAgentTokenRoutes(router: Router, deps: AgentTokenApiDeps): void {
  router
    .on('POST', '/api/v1/agent-tokens', (ctx) => createRoute(deps, ctx))
    .on('GET', '/api/v1/agent-tokens', async ({ res, url }) => {
      const page = readPage<[number, string]>(url, ['number', 'string'], MAX_LIMIT);
      const rows = await listAgentTokens(deps.db, { limit: page.limit + 1, after: page.after });
      const { items, nextCursor } = pageOf(rows, page.limit, (token) => [token.createdAt, token.id]);
      sendJson(res, 200, { tokens: items, nextCursor });
    })
    .on('DELETE', '/api/v1/agent-tokens/:id', (ctx) => revokeRoute(deps, ctx));
}

/** The plaintext token appears in this response only. */
async function createRoute(deps: AgentTokenApiDeps, { req, res }: RouteContext) {
  const body = parseBody(createSchema, await readJson(req, MAX_BODY));
  const now = deps.now();
  const { token, record } = await createAgentToken(deps.db, {
    agentType: 'static',
    labels: body.labels === undefined ? null : [...new Set(body.labels)],
    mandatoryLabels: [...new Set(body.mandatoryLabels ?? [])],
    expiresAt: body.expiresInSeconds === undefined ? null : now + body.expiresInSeconds * 1000,
    now,
  });
  const { id, prefix, labels, mandatoryLabels, expiresAt } = record;
  sendJson(res, 201, { id, token, prefix, labels, mandatoryLabels, expiresAt });
}

async function revokeRoute(deps: AgentTokenApiDeps, { res, params }: RouteContext) {
  const id = params['id'] ?? '';
  const record = await revokeAgentToken(deps.db, id, deps.now());
  if (!record) throw new HttpError(404, 'not found', `no agent token ${id}`);
  deps.onRevoked(record);
  sendJson(res, 200, { id, revoked: true });
}
