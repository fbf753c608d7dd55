import { parseArgs } from 'node:util';
import { readAdminToken } from '../config/admin-token.ts';

const USAGE = `usage: switchyard diagnose [--url <url>] [--json]

Shows each scaler backend's status and its spawn failures over the last 5 minutes, from
GET /api/v1/diagnose of a running coordinator (default --url http://127.0.0.1:8080).
The admin token comes from $SWITCHYARD_ADMIN_TOKEN, else <$SWITCHYARD_DATA_DIR or ./.switchyard>/admin-token.
`;

const DEFAULT_URL = 'http://127.0.0.1:8080';
const REQUEST_TIMEOUT_MS = 10_000;

export interface DiagnoseIo {
  stdout: Pick<NodeJS.WritableStream, 'write'>;
  stderr: Pick<NodeJS.WritableStream, 'write'>;
}

/** A failure reported in one line, exit 1. */
class DiagnoseError extends Error {
  override readonly name = 'DiagnoseError';
}

interface FailureSummary {
  boundCount: number;
  unboundCount: number;
  lastError: string;
  lastAtMs: number;
}

interface Diagnosis {
  coordinatorId: string;
  windowMs: number;
  agentsConnected: number;
  jobsWaitingForAgent: number;
  scaler: { enabled: boolean; state: string; caps: { maxAgents: number; maxCpu: number | null; maxMemoryBytes: number | null } };
  backends: { name: string; type: string; maxAgents: number; spawnsOnLocalHost: boolean; agents: Record<string, number>; recentFailures: FailureSummary | null }[];
  recentFailures: { backendName: string; bound: boolean; detail: string; timestampMs: number }[];
}

/** `switchyard diagnose`: 0 shown, 1 unreachable or refused, 2 bad usage. */
export async function runDiagnoseCommand(argv: string[], env: NodeJS.ProcessEnv = process.env, io: DiagnoseIo = { stdout: process.stdout, stderr: process.stderr }): Promise<number> {
  let values: { url?: string; json?: boolean; help?: boolean };
  try {
    values = parseArgs({ args: argv, options: { url: { type: 'string' }, json: { type: 'boolean' }, help: { type: 'boolean', short: 'h' } }, strict: true }).values;
  } catch (thrown) {
    io.stderr.write(`switchyard diagnose: ${(thrown as Error).message}\n${USAGE}`);
    return 2;
  }
  if (values.help) {
    io.stdout.write(USAGE);
    return 0;
  }
  try {
    const answer = (await fetchDiagnosis(values.url ?? DEFAULT_URL, env)) as Diagnosis;
    io.stdout.write(values.json ? `${JSON.stringify(answer, null, 2)}\n` : render(answer));
    return 0;
  } catch (thrown) {
    if (!(thrown instanceof DiagnoseError)) throw thrown;
    io.stderr.write(`switchyard diagnose: ${thrown.message}\n`);
    return 1;
  }
}

async function adminToken(env: NodeJS.ProcessEnv): Promise<string> {
  const found = await readAdminToken(env);
  if (!found.ok) throw new DiagnoseError(found.reason);
  return found.token;
}

async function fetchDiagnosis(base: string, env: NodeJS.ProcessEnv): Promise<unknown> {
  let url: URL;
  try {
    url = new URL('/api/v1/diagnose', base);
  } catch {
    throw new DiagnoseError(`--url is not a URL: "${base}"`);
  }
  const token = await adminToken(env);
  const response = await fetch(url, { headers: { authorization: `Bearer ${token}` }, signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS) }).catch((thrown: unknown) => {
    const cause = thrown instanceof Error && thrown.cause instanceof Error ? thrown.cause.message : String(thrown);
    throw new DiagnoseError(`cannot reach the coordinator at ${url.origin} (${cause}); is \`switchyard start\` running there?`);
  });
  const text = await response.text();
  if (!response.ok) throw new DiagnoseError(`the coordinator answered ${response.status} to GET ${url.pathname}: ${text.slice(0, 200)}`);
  try {
    return JSON.parse(text) as unknown;
  } catch {
    throw new DiagnoseError(`the coordinator answered GET ${url.pathname} with a body that is not JSON`);
  }
}

function render(d: Diagnosis): string {
  const minutes = Math.round(d.windowMs / 60_000);
  const lines = [
    `coordinator ${d.coordinatorId}: ${d.agentsConnected} agent(s) connected, ${d.jobsWaitingForAgent} job(s) waiting for an agent`,
    d.scaler.enabled ? `scaler ${d.scaler.state}: at most ${d.scaler.caps.maxAgents} agents in all` : 'scaler: no backends configured',
  ];
  if (d.backends.length > 0) {
    const rows = d.backends.map((b) => {
      const f = b.recentFailures;
      const counts = ['spawning', 'idle', 'busy', 'destroying'].map((state) => String(b.agents[state] ?? 0));
      return [b.name, b.type, b.spawnsOnLocalHost ? 'yes' : 'no', String(b.maxAgents), ...counts, f ? `${f.boundCount}/${f.unboundCount}` : '0/0', f?.lastError ?? '-'];
    });
    lines.push('', table([['BACKEND', 'TYPE', 'LOCAL', 'MAX', 'SPAWNING', 'IDLE', 'BUSY', 'DESTROYING', `FAILED ${minutes}m (bound/unbound)`, 'LAST ERROR'], ...rows]));
  }
  if (d.recentFailures.length > 0) {
    lines.push('recent spawn failures:');
    for (const f of d.recentFailures) lines.push(`  ${new Date(f.timestampMs).toISOString()}  ${f.backendName}  ${f.bound ? 'bound' : 'warm'}  ${f.detail}`);
  }
  return `${lines.join('\n').trimEnd()}\n`;
}

function table(rows: string[][]): string {
  const widths = rows[0]?.map((_, column) => Math.max(...rows.map((row) => (row[column] ?? '').length))) ?? [];
  return rows.map((row) => row.map((cell, column) => cell.padEnd(widths[column] ?? 0)).join('  ').trimEnd()).join('\n');
}
