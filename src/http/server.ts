import { createServer } from 'node:http';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import { parseRequestUrl } from '../../lib/request-url.ts';
import { ConfigError } from '../config/errors.ts';
import { canBind } from '../db/free-port.ts';
import { redactTokens } from '../security/redact.ts';
import { ArchiveUnreadableError } from '../retention/archive.ts';
import { requireAdmin } from './admin-token.ts';
import { HttpError, sendJson } from './respond.ts';
import type { Router } from './router.ts';

export interface HttpServerOptions {
  router: Router;
  adminTokenHash: Buffer;
  log: Logger;
}

/** Paths under these prefixes need the admin bearer token (docs/http-api.md#routes). */
const ADMIN_PREFIX = '/api/v1/';
const PUBLIC_API = new Set(['/api/v1/capabilities']);

export function createHttpServer(options: HttpServerOptions): Server {
  return createServer((req, res) => {
    void handle(options, req, res);
  });
}

async function handle(options: HttpServerOptions, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const started = performance.now();
  const method = req.method ?? 'GET';
  let path = req.url ?? '/';
  try {
    const url = parseRequestUrl(req);
    if (url === null) throw new HttpError(400, 'bad request', 'the request target is not a valid URL');
    path = url.pathname;
    if (url.pathname.startsWith(ADMIN_PREFIX) && !PUBLIC_API.has(url.pathname)) requireAdmin(req, options.adminTokenHash);
    const match = options.router.match(method, url.pathname);
    if (match === null) throw new HttpError(404, 'not found', `no route for ${url.pathname}`);
    if (match === 'method') throw new HttpError(405, 'method not allowed', `${method} is not allowed on ${url.pathname}`);
    await match.handler({ req, res, params: match.params, url });
  } catch (thrown) {
    answerError(options.log, req, res, thrown);
  } finally {
    options.log.debug({ method, path, status: res.statusCode, ms: Math.round(performance.now() - started) }, 'http request');
  }
}


function answerError(log: Logger, req: IncomingMessage, res: ServerResponse, thrown: unknown): void {
  if (thrown instanceof HttpError) {
    log.info({ method: req.method, path: redactTokens(req.url ?? '/'), status: thrown.status, reason: thrown.reason }, 'request refused');
    if (!res.headersSent) sendJson(res, thrown.status, { error: thrown.error, ...(thrown.reason ? { reason: thrown.reason } : {}) });
    return;
  }
  const err = thrown instanceof Error ? thrown : new Error(String(thrown));
  if (err instanceof ArchiveUnreadableError) {
    // That run's history is unavailable; nothing else is (docs/retention.md).
    log.error({ err, method: req.method, path: redactTokens(req.url ?? '/') }, 'run archive unreadable');
    if (!res.headersSent) sendJson(res, 500, { error: 'archive unreadable', reason: err.message });
    return;
  }
  log.error({ err, method: req.method, path: redactTokens(req.url ?? '/') }, 'request failed');
  if (!res.headersSent) sendJson(res, 500, { error: 'internal error', reason: err.name === 'RunNotOwnedError' ? err.message : undefined });
  else res.destroy();
}

/**
 * Refuses a PORT already taken before anything else starts (the database, the master key, the admin
 * token), naming the variable: another Switchyard, or a stock KiCI agent, whose own port defaults to 8080 too.
 */
export async function withFreePort<C extends { port: number; host: string }>(config: C): Promise<C> {
  if (config.port !== 0 && !(await canBind(config.port, config.host))) {
    throw new ConfigError('PORT', `PORT ${config.port} on ${config.host} is already in use (another Switchyard, or a KiCI agent whose KICI_PORT is 8080 by default); set PORT to a free port`);
  }
  return config;
}

export function listen(server: Server, port: number, host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      const address = server.address();
      resolve(typeof address === 'object' && address ? address.port : port);
    });
  });
}
