import { connect, parseCommandLine, processIo, runCli, type CliIo } from './client.ts';
import { table } from './format.ts';

const USAGE = `usage: switchyard diagnose [--url <url>] [--json]

Shows each scaler backend's status and its spawn failures over the last 5 minutes, from
GET /api/v1/diagnose of a running coordinator (default --url $SWITCHYARD_URL, else http://$HOST:$PORT).
The admin token comes from $SWITCHYARD_ADMIN_TOKEN, else <$SWITCHYARD_DATA_DIR or ./.switchyard>/admin-token.
`;

export type DiagnoseIo = CliIo;

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

const OPTIONS = { url: { type: 'string' }, json: { type: 'boolean' }, help: { type: 'boolean', short: 'h' } } as const;

/** `switchyard diagnose`: 0 shown, 1 unreachable or refused, 2 bad usage. */
export async function runDiagnoseCommand(argv: string[], env: NodeJS.ProcessEnv = process.env, io: DiagnoseIo = processIo): Promise<number> {
  return runCli('diagnose', USAGE, io, async () => {
    const { values } = parseCommandLine(argv, OPTIONS);
    if (values.help) {
      io.stdout.write(USAGE);
      return 0;
    }
    const api = await connect(env, values.url);
    const answer = await api.json<Diagnosis>('GET', '/api/v1/diagnose');
    io.stdout.write(values.json ? `${JSON.stringify(answer, null, 2)}\n` : render(answer));
    return 0;
  });
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
