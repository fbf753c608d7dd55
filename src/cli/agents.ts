import type { AgentView } from '../http/api-agents.ts';
import { CliUsageError, connect, help, parseCommandLine, processIo, runCli, type CliIo } from './client.ts';
import { age, table } from './format.ts';

const USAGE = `usage: switchyard agents [list] [--json] [--url U]
       switchyard agents disconnect <agentId> [--url U]

list         the connected agents of this coordinator and of its peers: labels, slots used/max,
             coordinator, connected since, and why an agent takes no new jobs
disconnect   close an agent's connection (it may reconnect; its running jobs are recovered)
The coordinator: --url, else $SWITCHYARD_URL, else http://$HOST:$PORT as 'switchyard start' binds.
The admin token comes from $SWITCHYARD_ADMIN_TOKEN, else <$SWITCHYARD_DATA_DIR or ./.switchyard>/admin-token.
`;

const OPTIONS = { url: { type: 'string' }, json: { type: 'boolean' }, help: { type: 'boolean', short: 'h' } } as const;

/** `switchyard agents [list|disconnect <id>]`: 0 done, 1 unknown agent or unreachable, 2 bad usage. */
export function runAgentsCommand(argv: string[], env: NodeJS.ProcessEnv = process.env, io: CliIo = processIo): Promise<number> {
  return runCli('agents', USAGE, io, async () => {
    const { values, positionals } = parseCommandLine(argv, OPTIONS);
    if (values.help) return help(io, USAGE);
    const [command = 'list', ...rest] = positionals;
    if (command === 'list' && rest.length === 0) {
      const answer = await (await connect(env, values.url)).json<{ agents: AgentView[] }>('GET', '/api/v1/agents');
      io.stdout.write(values.json ? `${JSON.stringify(answer, null, 2)}\n` : render(answer.agents));
      return 0;
    }
    const [agentId] = rest;
    if (command === 'disconnect' && agentId !== undefined && rest.length === 1) {
      await (await connect(env, values.url)).json('DELETE', `/api/v1/agents/${encodeURIComponent(agentId)}`);
      io.stdout.write(`disconnected agent ${agentId}\n`);
      return 0;
    }
    throw new CliUsageError(`unexpected arguments: ${positionals.join(' ')}`);
  });
}

function render(agents: AgentView[], now = Date.now()): string {
  const rows = agents.map((a) => [
    a.agentId,
    a.labels.join(',') || '-',
    `${a.slotsUsed}/${a.maxConcurrency}`,
    a.coordinatorId,
    a.connectedAt === null ? '-' : `${age(a.connectedAt, now)} ago`,
    a.unusable ?? 'ready',
    a.jobs.map((job) => `${job.jobKey} (run ${job.runId.slice(0, 8)})`).join(', ') || '-',
  ]);
  return table([['AGENT', 'LABELS', 'SLOTS', 'COORDINATOR', 'CONNECTED', 'STATE', 'JOBS'], ...rows]);
}
