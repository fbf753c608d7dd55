import { parseArgs, type ParseArgsConfig } from 'node:util';
import { coordinatorTarget } from '../config/coordinator-target.ts';
import { ConfigError } from '../config/errors.ts';

/** Where a command writes; tests pass buffers. */
export interface CliIo {
  stdout: Pick<NodeJS.WritableStream, 'write'>;
  stderr: Pick<NodeJS.WritableStream, 'write'>;
}

export const processIo: CliIo = { stdout: process.stdout, stderr: process.stderr };

/** A failure reported in one line, exit 1: unreachable, refused, or not found. */
export class CliError extends Error {
  override readonly name = 'CliError';
}

/** Arguments that cannot work: reported with the usage, exit 2. */
export class CliUsageError extends Error {
  override readonly name = 'CliUsageError';
}

export const EXIT_FAILED = 1;
export const EXIT_USAGE = 2;
const REQUEST_TIMEOUT_MS = 10_000;

/** The admin API of one running coordinator. */
export interface Api {
  readonly url: URL;
  /** A JSON request; a non-2xx answer throws `CliError` naming status, route and reason. */
  json<T>(method: string, path: string, body?: unknown): Promise<T>;
  /** A GET whose body is streamed (no time limit); a non-2xx answer throws as `json` does. */
  download(path: string): Promise<Response>;
}

/**
 * Runs one command: `CliUsageError` prints the usage and exits 2, `CliError` one line and exits 1.
 * Anything else is a bug and propagates.
 */
export async function runCli(command: string, usage: string, io: CliIo, body: () => Promise<number>): Promise<number> {
  try {
    return await body();
  } catch (thrown) {
    if (thrown instanceof CliUsageError) {
      io.stderr.write(`switchyard ${command}: ${thrown.message}\n${usage}`);
      return EXIT_USAGE;
    }
    if (!(thrown instanceof CliError)) throw thrown;
    io.stderr.write(`switchyard ${command}: ${thrown.message}\n`);
    return EXIT_FAILED;
  }
}

/** `--help`: the usage on stdout, exit 0. */
export function help(io: CliIo, usage: string): number {
  io.stdout.write(usage);
  return 0;
}

/** `parseArgs`, strict, with positionals; an unknown or malformed flag is a usage error. */
export function parseCommandLine<O extends NonNullable<ParseArgsConfig['options']>>(argv: string[], options: O) {
  try {
    return parseArgs({ args: argv, options, allowPositionals: true, strict: true });
  } catch (thrown) {
    throw new CliUsageError(thrown instanceof Error ? thrown.message : String(thrown), { cause: thrown });
  }
}

/** The coordinator as `coordinatorTarget` finds it (`--url`, `SWITCHYARD_URL`, `HOST`/`PORT`) and its admin token. */
export async function connect(env: NodeJS.ProcessEnv, urlFlag?: string): Promise<Api> {
  let target;
  try {
    target = await coordinatorTarget(env, urlFlag);
  } catch (thrown) {
    if (!(thrown instanceof ConfigError)) throw thrown;
    if (thrown.key === '--url') throw new CliUsageError(thrown.message, { cause: thrown });
    throw new CliError(thrown.message, { cause: thrown });
  }
  const { url, adminToken } = target;
  return { url, json: (method, path, body) => request(url, adminToken, method, path, body), download: (path) => download(url, adminToken, path) };
}

async function download(base: URL, adminToken: string, path: string): Promise<Response> {
  const url = new URL(path, base);
  const response = await fetch(url, { headers: { authorization: `Bearer ${adminToken}` } }).catch((thrown: unknown) => {
    throw unreachable(base, thrown);
  });
  if (!response.ok) {
    const text = await response.text();
    throw new CliError(refusal(response, `GET ${url.pathname}`, parseJson(text), text));
  }
  return response;
}

async function request<T>(base: URL, adminToken: string, method: string, path: string, body: unknown): Promise<T> {
  const url = new URL(path, base);
  let response: Response;
  try {
    response = await fetch(url, {
      method,
      headers: { authorization: `Bearer ${adminToken}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
    });
  } catch (thrown) {
    throw unreachable(base, thrown);
  }
  const text = await response.text();
  const answer = parseJson(text);
  if (!response.ok) throw new CliError(refusal(response, `${method} ${url.pathname}`, answer, text));
  if (answer === undefined) throw new CliError(`the coordinator answered ${method} ${url.pathname} with a body that is not JSON`);
  return answer as T;
}

function unreachable(base: URL, thrown: unknown): CliError {
  const cause = thrown instanceof Error && thrown.cause instanceof Error ? thrown.cause.message : String(thrown);
  return new CliError(`cannot reach the coordinator at ${base.origin} (${cause}); is \`switchyard start\` running there? (SWITCHYARD_URL or --url name another)`);
}

function refusal(response: Response, route: string, answer: unknown, text: string): string {
  const { error, reason } = (answer ?? {}) as { error?: string; reason?: string };
  const detail = [error, reason].filter(Boolean).join(': ') || text.slice(0, 200) || response.statusText;
  const hint = response.status === 401 ? ' (the admin token comes from SWITCHYARD_ADMIN_TOKEN, else the data dir: SWITCHYARD_DATA_DIR)' : '';
  return `the coordinator answered ${response.status} to ${route}: ${detail}${hint}`;
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}
