import { coerceError } from '../../../lib/errors.ts';

export interface GitHubClientOptions {
  /** @default 'https://api.github.com' */
  apiUrl?: string;
  /** An installation token, or a function that mints one (called once per request). */
  token: string | (() => Promise<string>);
  /** Per request, body included. @default 10_000 */
  timeoutMs?: number;
  /** @default globalThis.fetch */
  fetchImpl?: typeof fetch;
}

export interface GitHubResponse {
  status: number;
  contentType: string;
  body: Buffer;
  /** The body was longer than `maxBytes`; `body` holds only its start. */
  truncated: boolean;
}

/** A request that produced no HTTP status: credentials, network, timeout. */
export type GitHubResult = { ok: true; response: GitHubResponse } | { ok: false; detail: string };

export type GitHubGet = (path: string, request: { accept: string; maxBytes: number }) => Promise<GitHubResult>;

export const GITHUB_API_URL = 'https://api.github.com';
export const GITHUB_TIMEOUT_MS = 10_000;

/** A GET against the GitHub REST API that never throws and never reads more than `maxBytes` of a body. */
export function createGitHubGet(options: GitHubClientOptions): GitHubGet {
  const apiUrl = (options.apiUrl ?? GITHUB_API_URL).replace(/\/+$/, '');
  const timeoutMs = options.timeoutMs ?? GITHUB_TIMEOUT_MS;
  const fetchImpl = options.fetchImpl ?? fetch;
  return async (path, { accept, maxBytes }) => {
    let token: string;
    try {
      token = typeof options.token === 'string' ? options.token : await options.token();
    } catch (thrown) {
      return { ok: false, detail: `no GitHub credentials: ${coerceError(thrown).message}` };
    }
    try {
      const response = await fetchImpl(`${apiUrl}${path}`, {
        headers: {
          accept,
          authorization: `Bearer ${token}`,
          'user-agent': 'switchyard',
          'x-github-api-version': '2022-11-28',
        },
        signal: AbortSignal.timeout(timeoutMs),
      });
      const { body, truncated } = await readLimited(response, maxBytes);
      const contentType = response.headers.get('content-type') ?? '';
      return { ok: true, response: { status: response.status, contentType, body, truncated } };
    } catch (thrown) {
      const error = coerceError(thrown);
      if (error.name === 'TimeoutError') return { ok: false, detail: `GET ${path} timed out after ${timeoutMs} ms` };
      return { ok: false, detail: `GET ${path} failed: ${describe(error)}` };
    }
  };
}

async function readLimited(response: Response, maxBytes: number): Promise<{ body: Buffer; truncated: boolean }> {
  if (response.body === null) return { body: Buffer.alloc(0), truncated: false };
  const chunks: Buffer[] = [];
  let total = 0;
  const reader: ReadableStreamDefaultReader<Uint8Array> = response.body.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return { body: Buffer.concat(chunks), truncated: false };
    chunks.push(Buffer.from(value));
    total += value.byteLength;
    if (total > maxBytes) {
      await reader.cancel();
      return { body: Buffer.concat(chunks), truncated: true };
    }
  }
}

/** undici hides the socket error in `cause` ("fetch failed" alone says nothing). */
function describe(error: Error): string {
  const cause = error.cause;
  return cause instanceof Error ? `${error.message} (${cause.message})` : error.message;
}

/** A JSON answer of 200, or why there is none (an error status, a body over `maxBytes`, no answer). */
export async function getJson(get: GitHubGet, path: string, maxBytes: number): Promise<{ value: unknown } | { transient: string }> {
  const result = await get(path, { accept: 'application/vnd.github+json', maxBytes });
  if (!result.ok) return { transient: result.detail };
  if (result.response.status !== 200 || result.response.truncated) return { transient: statusDetail(path, result.response) };
  return { value: parseJson(result.response.body) };
}

/** GitHub's `{message}` from an error body, for the detail of a transient outcome. */
export function statusDetail(path: string, response: GitHubResponse): string {
  const message = githubMessage(response);
  return `GET ${path} answered HTTP ${response.status}${message === null ? '' : `: ${message}`}`;
}

export function githubMessage(response: GitHubResponse): string | null {
  const value = parseJson(response.body);
  if (typeof value === 'object' && value !== null && 'message' in value && typeof value.message === 'string') {
    return value.message.slice(0, 200);
  }
  return null;
}

/** The body as JSON, or undefined when it is not JSON. */
export function parseJson(body: Buffer): unknown {
  try {
    return JSON.parse(body.toString('utf8')) as unknown;
  } catch {
    return undefined;
  }
}

/** `owner/name` → its two parts, or null when it is not a repository full name. */
export function splitRepository(repository: string): { owner: string; name: string } | null {
  const match = /^([A-Za-z0-9_.-]+)\/([A-Za-z0-9_.-]+)$/.exec(repository);
  const [, owner, name] = match ?? [];
  if (owner === undefined || name === undefined || /^\.+$/.test(owner) || /^\.+$/.test(name)) return null;
  return { owner, name };
}

/** `/repos/<owner>/<name>` with both parts encoded, or null when `repository` is not `owner/name`. */
export function repositoryApiPath(repository: string): string | null {
  const repo = splitRepository(repository);
  return repo === null ? null : `/repos/${encodeURIComponent(repo.owner)}/${encodeURIComponent(repo.name)}`;
}

/** Encodes each segment, keeping the `/` of branch names such as `release/1.x`. */
export function encodePath(value: string): string {
  return value.split('/').map(encodeURIComponent).join('/');
}
