import { readAdminToken } from './admin-token.ts';
import { DEFAULT_HOST, DEFAULT_PORT, parseEnvWith } from './config.ts';
import { envSchema, url as urlOf } from './env.ts';
import { ConfigError } from './errors.ts';

/** A running coordinator as a command reaches it: its HTTP base URL and the admin bearer token. */
export interface CoordinatorTarget {
  url: URL;
  adminToken: string;
}

/** The server's HOST and PORT, and `SWITCHYARD_URL`, which only commands read (a coordinator never checks it). */
const targetSchema = envSchema.pick({ HOST: true, PORT: true }).extend({ SWITCHYARD_URL: urlOf(['http', 'https']) });

/**
 * Where a running coordinator listens, found as `switchyard start` chose it: `$SWITCHYARD_URL` when
 * set, else `http://$HOST:$PORT` with the server's defaults; a wildcard bind address is reached on
 * loopback. `override` (a command's `--url`) wins over both. Throws `ConfigError`.
 */
export function coordinatorUrl(env: NodeJS.ProcessEnv, override?: string): URL {
  if (override !== undefined) return parseUrl('--url', override);
  const raw = parseEnvWith(targetSchema, env);
  if (raw.SWITCHYARD_URL !== undefined) return parseUrl('SWITCHYARD_URL', raw.SWITCHYARD_URL);
  return parseUrl('HOST', `http://${reachableAddress(raw.HOST ?? DEFAULT_HOST, raw.PORT ?? DEFAULT_PORT)}`);
}

/** `host:port` as a client reaches a server bound there: a wildcard bind address is reached on loopback. */
export function reachableAddress(host: string, port: number): string {
  const reachable = host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host;
  return `${reachable.includes(':') ? `[${reachable}]` : reachable}:${port}`;
}

/** The coordinator's URL and the admin token from its data dir (see `readAdminToken`). Throws `ConfigError`. */
export async function coordinatorTarget(env: NodeJS.ProcessEnv, override?: string): Promise<CoordinatorTarget> {
  const url = coordinatorUrl(env, override);
  const found = await readAdminToken(env);
  if (!found.ok) throw new ConfigError('SWITCHYARD_ADMIN_TOKEN', found.reason);
  return { url, adminToken: found.token };
}

function parseUrl(key: string, value: string): URL {
  const url = URL.canParse(value) ? new URL(value) : null;
  if (url?.protocol === 'http:' || url?.protocol === 'https:') return url;
  throw new ConfigError(key, `${key} is not an http(s) URL: "${value}"`);
}
