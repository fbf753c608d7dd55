import type { IncomingMessage } from 'node:http';

/** The request target as a URL, or null when it is not one (`//[`, `http://x:99999/`): `new URL` would throw. */
export function parseRequestUrl(req: IncomingMessage): URL | null {
  const target = req.url ?? '/';
  return URL.canParse(target, 'http://localhost') ? new URL(target, 'http://localhost') : null;
}
