import type { Kysely } from 'kysely';
import { z } from 'zod';
import type { DeliveryKey } from '../db/deliveries.ts';
import { listGenericSources, upsertGenericSource } from '../db/generic-sources.ts';
import { deleteRepository, listRepositories, upsertRepository } from '../db/repositories.ts';
import { localRepositoryProblem } from '../lockfile/providers/local-git.ts';
import type { Schema } from '../db/schema.ts';
import { registerDeliveryRoutes } from './api-deliveries.ts';
import { MAX_LIMIT, pageOf, readPage } from './pagination.ts';
import { HttpError, parseBody, readJson, sendJson } from './respond.ts';
import type { Router } from './router.ts';

export interface SourceApiDeps {
  db: Kysely<Schema>;
  now: () => number;
  onRequeued: (key: DeliveryKey) => void;
  /** A repository was registered, changed or removed here (what was read of them is stale). */
  onRepositoriesChanged?: () => void;
}

/** A branch name git accepts that can never read as an option (a subset of `git check-ref-format`). */
const BRANCH_NAME = /^(?!-)(?!.*\.\.)(?!.*@\{)(?!.*\/\/)(?!\/)(?!.*[/.]$)(?:(?!\p{Cc})[^\s~^:?*[\\]){1,200}$/u;

const repositorySchema = z
  .object({
    name: z.string().regex(/^[\w.-]+\/[\w.-]+$/, 'must be owner/name'),
    provider: z.enum(['local', 'github']),
    path: z.string().min(1).optional(),
    cloneUrl: z.string().min(1).regex(/^[^-\s]\S*$/, 'must be a URL (no leading "-", no whitespace)').optional(),
    defaultBranch: z.string().regex(BRANCH_NAME, 'must be a branch name (no leading "-", whitespace, "..", "@{" or control characters)').optional(),
    token: z.string().min(1).optional(),
    acceptsEventsFrom: z.array(z.string().regex(/^[\w.-]+\/([\w.-]+|\*)$/, 'must be owner/name or owner/*')).max(100).optional(),
  })
  .refine((r) => r.provider !== 'local' || r.path !== undefined, { message: 'a local repository needs path', path: ['path'] })
  .refine((r) => r.provider !== 'github' || r.token !== undefined, { message: 'a github repository needs token', path: ['token'] });

const sourceSchema = z.object({
  name: z.string().regex(/^[\w.-]+$/, 'letters, digits, dot, dash and underscore only'),
  verification: z.enum(['hmac-sha256', 'api-key', 'none']),
  header: z.string().min(1).optional(),
  secret: z.string().min(8).optional(),
  eventTypeHeader: z.string().min(1).optional(),
  idempotencyHeader: z.string().min(1).optional(),
  repository: z.string().min(1),
});

/** The deliveries log with dead letters (src/http/api-deliveries.ts), repository registrations and generic webhook sources. */
export function registerSourceRoutes(router: Router, deps: SourceApiDeps): void {
  const { db } = deps;
  registerDeliveryRoutes(router, deps);
  router
    .on('GET', '/api/v1/repositories', async ({ res, url }) => {
      const page = readPage<[string]>(url, ['string'], MAX_LIMIT);
      const rows = await listRepositories(db, { limit: page.limit + 1, after: page.after?.[0] ?? null });
      const { items, nextCursor } = pageOf(rows, page.limit, (repo) => [repo.name]);
      // The token reads lock files and posts commit statuses; it is never shown.
      sendJson(res, 200, { repositories: items.map(({ token, ...rest }) => ({ ...rest, hasToken: token !== null })), nextCursor });
    })
    .on('POST', '/api/v1/repositories', async ({ req, res }) => {
      const body = parseBody(repositorySchema, await readJson(req, 64 * 1024));
      const problem = body.provider === 'local' ? await localRepositoryProblem(body.path ?? '') : null;
      if (problem !== null) throw new HttpError(400, 'invalid request', `path: ${problem}`);
      const registration = { name: body.name, provider: body.provider, path: body.path ?? null, cloneUrl: body.cloneUrl ?? null, acceptsEventsFrom: body.acceptsEventsFrom ?? [] };
      await upsertRepository(db, { ...registration, defaultBranch: body.defaultBranch ?? null, token: body.token ?? null }, deps.now()).finally(() => deps.onRepositoriesChanged?.());
      sendJson(res, 201, { ...registration, defaultBranch: body.defaultBranch ?? null });
    })
    .on('DELETE', '/api/v1/repositories/:owner/:name', async ({ res, params }) => {
      const name = `${params['owner']}/${params['name']}`;
      const deleted = await deleteRepository(db, name).finally(() => deps.onRepositoriesChanged?.());
      if (!deleted) throw new HttpError(404, 'not found', `no repository ${name}`);
      sendJson(res, 200, { name, deleted: true });
    })
    .on('GET', '/api/v1/sources', async ({ res, url }) => {
      const page = readPage<[string]>(url, ['string'], MAX_LIMIT);
      const rows = await listGenericSources(db, { limit: page.limit + 1, after: page.after?.[0] ?? null });
      const { items, nextCursor } = pageOf(rows, page.limit, (row) => [row.name]);
      sendJson(res, 200, { sources: items, nextCursor });
    })
    .on('POST', '/api/v1/sources', async ({ req, res }) => {
      const body = parseBody(sourceSchema, await readJson(req, 64 * 1024));
      if (body.verification !== 'none' && !body.secret) throw new HttpError(400, 'invalid request', 'secret: required unless verification is none');
      const row = {
        ...{ name: body.name, verification: body.verification, header: body.header ?? null, secret: body.secret ?? null },
        ...{ event_type_header: body.eventTypeHeader ?? null, idempotency_header: body.idempotencyHeader ?? null },
        ...{ repository: body.repository, created_at: deps.now() },
      };
      await upsertGenericSource(db, row);
      sendJson(res, 201, { name: body.name, verification: body.verification, repository: body.repository });
    });
}
