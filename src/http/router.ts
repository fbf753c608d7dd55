import type { IncomingMessage, ServerResponse } from 'node:http';
import { HttpError } from './respond.ts';

export interface RouteContext {
  req: IncomingMessage;
  res: ServerResponse;
  params: Record<string, string>;
  url: URL;
}

export type RouteHandler = (ctx: RouteContext) => Promise<void> | void;

interface Route {
  method: string;
  path: string;
  parts: string[];
  handler: RouteHandler;
}

/** Turns a path parameter as a client wrote it into the value the handlers take (a run's number into its id). */
export type ParamResolver = (value: string) => Promise<string>;

interface Resolution {
  prefix: string;
  param: string;
  resolve: ParamResolver;
}

/** A small exact-segment router: `/api/v1/runs/:id/cancel`. */
export class Router {
  private readonly routes: Route[] = [];
  private readonly resolutions: Resolution[] = [];

  on(method: string, path: string, handler: RouteHandler): this {
    this.routes.push({ method, path, parts: path.split('/').filter(Boolean), handler });
    return this;
  }

  /** Every route under `prefix` with the parameter `param` gets it through `resolve` before its handler runs. */
  resolveParam(prefix: string, param: string, resolve: ParamResolver): this {
    this.resolutions.push({ prefix, param, resolve });
    return this;
  }

  /** The handler and its path parameters, `null` for no path match, or `'method'` for a path with another method. */
  match(method: string, pathname: string): { handler: RouteHandler; params: Record<string, string> } | null | 'method' {
    const segments = pathname.split('/').filter(Boolean);
    let pathMatched = false;
    for (const route of this.routes) {
      const params = matchParts(route.parts, segments);
      if (!params) continue;
      if (route.method !== method) {
        pathMatched = true;
        continue;
      }
      return { handler: this.withResolvedParams(route), params };
    }
    return pathMatched ? 'method' : null;
  }

  private withResolvedParams(route: Route): RouteHandler {
    const resolutions = this.resolutions.filter((r) => route.path.startsWith(r.prefix) && route.parts.includes(`:${r.param}`));
    if (resolutions.length === 0) return route.handler;
    return async (ctx) => {
      const params = { ...ctx.params };
      for (const { param, resolve } of resolutions) params[param] = await resolve(params[param] ?? '');
      await route.handler({ ...ctx, params });
    };
  }
}

function matchParts(parts: string[], segments: string[]): Record<string, string> | null {
  if (parts.length !== segments.length) return null;
  const params: Record<string, string> = {};
  for (let i = 0; i < parts.length; i++) {
    const part = parts[i] as string;
    const segment = segments[i] as string;
    if (part.startsWith(':')) params[part.slice(1)] = decodeSegment(segment);
    else if (part !== segment) return null;
  }
  return params;
}

/** A path parameter; `%ZZ` or a cut-off `%E0%A4` is the client's error, not a URIError (500). */
function decodeSegment(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    throw new HttpError(400, 'bad request', `malformed percent-encoding in path segment ${JSON.stringify(segment)}`);
  }
}
