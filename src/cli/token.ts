import { CliUsageError, connect, parseCommandLine, processIo, runCli, type Api, type CliIo } from './client.ts';
import { formatTime, splitList, table } from './format.ts';

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
  --url <url>   the coordinator (default $SWITCHYARD_URL, else http://$HOST:$PORT as 'switchyard start' binds)

The admin token comes from $SWITCHYARD_ADMIN_TOKEN, else <$SWITCHYARD_DATA_DIR or ./.switchyard>/admin-token.
`;

export type TokenCommandIo = CliIo;

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
export async function runTokenCommand(argv: string[], env: NodeJS.ProcessEnv = process.env, io: TokenCommandIo = processIo): Promise<number> {
  return runCli('token', USAGE, io, () => dispatch(argv, env, io));
}

async function dispatch(argv: string[], env: NodeJS.ProcessEnv, io: TokenCommandIo): Promise<number> {
  const { values, positionals } = parseCommandLine(argv, OPTIONS);
  const [command, ...rest] = positionals;
  if (values.help || command === undefined || command === 'help') {
    io.stdout.write(USAGE);
    return 0;
  }
  if (command === 'create' && rest.length === 0) {
    const body = createBody(values);
    return create(await connect(env, values.url), body, io);
  }
  if (command === 'list' && rest.length === 0) return list(await connect(env, values.url), values.json === true, io);
  if (command === 'revoke' && rest.length === 1) return revoke(await connect(env, values.url), rest[0] as string, io);
  throw new CliUsageError(`unexpected arguments: ${positionals.join(' ')}`);
}

function createBody(values: { labels?: string; 'mandatory-labels'?: string; 'expires-in'?: string }): Record<string, unknown> {
  const body: Record<string, unknown> = {};
  if (values.labels !== undefined) body['labels'] = splitList(values.labels);
  if (values['mandatory-labels'] !== undefined) body['mandatoryLabels'] = splitList(values['mandatory-labels']);
  if (values['expires-in'] !== undefined) {
    const seconds = Number(values['expires-in']);
    if (!/^\d+$/.test(values['expires-in']) || !Number.isSafeInteger(seconds) || seconds <= 0) {
      throw new CliUsageError(`--expires-in must be a positive whole number of seconds, got "${values['expires-in']}"`);
    }
    body['expiresInSeconds'] = seconds;
  }
  return body;
}

async function create(api: Api, body: Record<string, unknown>, io: TokenCommandIo) {
  const created = await api.json<TokenView & { token: string }>('POST', '/api/v1/agent-tokens', body);
  io.stdout.write(`${created.token}\n`);
  io.stderr.write(
    `created agent token ${created.id} (prefix ${created.prefix}, expires ${formatTime(created.expiresAt, 'never')}` +
      `, labels ${created.labels?.join(',') ?? 'unscoped'}, mandatory ${created.mandatoryLabels.join(',') || 'none'})\n` +
      'the token is shown only once\n',
  );
  return 0;
}

async function list(api: Api, json: boolean, io: TokenCommandIo) {
  const answer = await api.json<{ tokens: TokenView[] }>('GET', '/api/v1/agent-tokens');
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
  await api.json('DELETE', `/api/v1/agent-tokens/${encodeURIComponent(id)}`);
  io.stderr.write(`revoked agent token ${id}\n`);
  return 0;
}

function stateOf(token: TokenView, now = Date.now()): string {
  if (token.revokedAt !== null) return 'revoked';
  if (token.consumedAt !== null) return 'consumed';
  if (token.expiresAt !== null && token.expiresAt <= now) return 'expired';
  return 'active';
}
