import { parseArgs } from 'node:util';
import { readAdminToken } from '../config/admin-token.ts';

const USAGE = `usage: switchyard token <command> [options]

commands:
  create   mint a static agent token; prints only the token on stdout
             --labels a,b            label scope (an agent may claim only these)
             --mandatory-labels x,y  taints: the agent only takes jobs requiring all of them
             --expires-in <seconds>  time to live (default: no expiry)
  list     list tokens (prefix only); --json for the raw API answer
  revoke <id>
             revoke a token and disconnect every agent using it

options:
  --url <url>   the coordinator (default http://127.0.0.1:8080)

The admin token comes from $SWITCHYARD_ADMIN_TOKEN, else <$SWITCHYARD_DATA_DIR or ./.switchyard>/admin-token.
`;

const DEFAULT_URL = 'http://127.0.0.1:8080';
const REQUEST_TIMEOUT_MS = 10_000;
const EXIT_FAILED = 1;
const EXIT_USAGE = 2;

export interface TokenCommandIo {
  stdout: Pick<NodeJS.WritableStream, 'write'>;
  stderr: Pick<NodeJS.WritableStream, 'write'>;
}

/** A failure the command reports in one line and exits 1 for; never a stack trace. */
class TokenCommandError extends Error {
  override readonly name = 'TokenCommandError';
}

/** Arguments that cannot work: reported with the usage, exit 2. */
class TokenUsageError extends Error {
  override readonly name = 'TokenUsageError';
}

interface TokenView {
  id: string;
  prefix: string;
  agentType: string;
  labels: string[] | null;
  mandatoryLabels: string[];
  expiresAt: number | null;
  revokedAt: number | null;
  consumedAt: number | null;
  lastSeenAt: number | null;
}

interface Api {
  call(method: string, path: string, body?: unknown): Promise<unknown>;
}

const OPTIONS = {
  url: { type: 'string' },
  labels: { type: 'string' },
  'mandatory-labels': { type: 'string' },
  'expires-in': { type: 'string' },
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const;

/**
 * `switchyard token create|list|revoke` against a running coordinator's API. Exit status: 0 done,
 * 1 the coordinator is unreachable or refused, 2 bad usage.
 */
export async function runTokenCommand(
  argv: string[],
  env: NodeJS.ProcessEnv = process.env,
  io: TokenCommandIo = { stdout: process.stdout, stderr: process.stderr },
): Promise<number> {
  try {
    return await dispatch(argv, env, io);
  } catch (thrown) {
    if (thrown instanceof TokenUsageError) {
      io.stderr.write(`switchyard token: ${thrown.message}\n${USAGE}`);
      return EXIT_USAGE;
    }
    if (!(thrown instanceof TokenCommandError)) throw thrown;
    io.stderr.write(`switchyard token: ${thrown.message}\n`);
    return EXIT_FAILED;
  }
}

async function dispatch(argv: string[], env: NodeJS.ProcessEnv, io: TokenCommandIo): Promise<number> {
  const { values, positionals } = parseArguments(argv);
  const [command, ...rest] = positionals;
  if (values.help || command === undefined || command === 'help') {
    io.stdout.write(USAGE);
    return 0;
  }
  if (command === 'create' && rest.length === 0) {
    const body = createBody(values);
    return create(await connect(values.url ?? DEFAULT_URL, env), body, io);
  }
  if (command === 'list' && rest.length === 0) return list(await connect(values.url ?? DEFAULT_URL, env), values.json === true, io);
  if (command === 'revoke' && rest.length === 1) return revoke(await connect(values.url ?? DEFAULT_URL, env), rest[0] as string, io);
  throw new TokenUsageError(`unexpected arguments: ${positionals.join(' ')}`);
}

function parseArguments(argv: string[]) {
  try {
    return parseArgs({ args: argv, options: OPTIONS, allowPositionals: true, strict: true });
  } catch (thrown) {
    throw new TokenUsageError(thrown instanceof Error ? thrown.message : String(thrown), { cause: thrown });
  }
}

function createBody(values: { labels?: string; 'mandatory-labels'?: string; 'expires-in'?: string }): Record<string, unknown> {
  const body: Record<string, unknown> = {};
  if (values.labels !== undefined) body['labels'] = splitList(values.labels);
  if (values['mandatory-labels'] !== undefined) body['mandatoryLabels'] = splitList(values['mandatory-labels']);
  if (values['expires-in'] !== undefined) {
    const seconds = Number(values['expires-in']);
    if (!/^\d+$/.test(values['expires-in']) || !Number.isSafeInteger(seconds) || seconds <= 0) {
      throw new TokenUsageError(`--expires-in must be a positive whole number of seconds, got "${values['expires-in']}"`);
    }
    body['expiresInSeconds'] = seconds;
  }
  return body;
}

async function create(api: Api, body: Record<string, unknown>, io: TokenCommandIo) {
  const created = (await api.call('POST', '/api/v1/agent-tokens', body)) as TokenView & { token: string };
  io.stdout.write(`${created.token}\n`);
  io.stderr.write(
    `created agent token ${created.id} (prefix ${created.prefix}, expires ${formatTime(created.expiresAt, 'never')}` +
      `, labels ${created.labels?.join(',') ?? 'unscoped'}, mandatory ${created.mandatoryLabels.join(',') || 'none'})\n` +
      'the token is shown only once\n',
  );
  return 0;
}

async function list(api: Api, json: boolean, io: TokenCommandIo) {
  const answer = (await api.call('GET', '/api/v1/agent-tokens')) as { tokens: TokenView[] };
  if (json) {
    io.stdout.write(`${JSON.stringify(answer, null, 2)}\n`);
    return 0;
  }
  const rows = answer.tokens.map((t) => [
    t.id,
    t.prefix,
    t.agentType,
    stateOf(t),
    t.labels?.join(',') ?? '*',
    t.mandatoryLabels.join(',') || '-',
    formatTime(t.expiresAt, 'never'),
    formatTime(t.lastSeenAt, '-'),
  ]);
  io.stdout.write(table([['ID', 'PREFIX', 'TYPE', 'STATE', 'LABELS', 'MANDATORY', 'EXPIRES', 'LAST SEEN'], ...rows]));
  return 0;
}

async function revoke(api: Api, id: string, io: TokenCommandIo) {
  await api.call('DELETE', `/api/v1/agent-tokens/${encodeURIComponent(id)}`);
  io.stderr.write(`revoked agent token ${id}\n`);
  return 0;
}

async function connect(url: string, env: NodeJS.ProcessEnv): Promise<Api> {
  let base: URL;
  try {
    base = new URL(url);
  } catch (thrown) {
    throw new TokenUsageError(`--url is not a URL: "${url}"`, { cause: thrown });
  }
  const adminToken = await adminTokenFor(env);
  return { call: (method, path, body) => request(base, adminToken, method, path, body) };
}

async function adminTokenFor(env: NodeJS.ProcessEnv): Promise<string> {
  const found = await readAdminToken(env);
  if (!found.ok) throw new TokenCommandError(found.reason);
  return found.token;
}

async function request(base: URL, adminToken: string, method: string, path: string, body: unknown): Promise<unknown> {
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
    const cause = thrown instanceof Error && thrown.cause instanceof Error ? thrown.cause.message : String(thrown);
    throw new TokenCommandError(`cannot reach the coordinator at ${base.origin} (${cause}); is \`switchyard start\` running there?`);
  }
  const text = await response.text();
  const answer = parseJson(text);
  if (!response.ok) {
    const { error, reason } = (answer ?? {}) as { error?: string; reason?: string };
    const detail = [error, reason].filter(Boolean).join(': ') || text.slice(0, 200) || response.statusText;
    throw new TokenCommandError(`the coordinator answered ${response.status} to ${method} ${url.pathname}: ${detail}`);
  }
  if (answer === undefined) throw new TokenCommandError(`the coordinator answered ${method} ${url.pathname} with a body that is not JSON`);
  return answer;
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}

function splitList(value: string): string[] {
  return value
    .split(',')
    .map((item) => item.trim())
    .filter(Boolean);
}

function stateOf(token: TokenView, now = Date.now()): string {
  if (token.revokedAt !== null) return 'revoked';
  if (token.consumedAt !== null) return 'consumed';
  if (token.expiresAt !== null && token.expiresAt <= now) return 'expired';
  return 'active';
}

function formatTime(ms: number | null, none: string): string {
  return ms === null ? none : new Date(ms).toISOString();
}

function table(rows: string[][]): string {
  const widths = rows[0]?.map((_, column) => Math.max(...rows.map((row) => (row[column] ?? '').length))) ?? [];
  return rows.map((row) => row.map((cell, column) => cell.padEnd(widths[column] ?? 0)).join('  ').trimEnd()).join('\n') + '\n';
}
