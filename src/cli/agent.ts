import { parseArgs } from 'node:util';
import { pino } from 'pino';
import { Agent, AGENT_EXIT } from '../reference-agent/agent.ts';
import { AgentOptionsError, compileAgentOptions, type AgentOptions } from '../reference-agent/options.ts';

export const AGENT_USAGE = `usage: switchyard agent --url <ws url> [--token <kat_...>] [options]

  --url URL[,URL...]      coordinator socket, e.g. ws://127.0.0.1:8080/ws/agent; several coordinators
                          of one database, comma-separated, are tried in turn when a connection fails
  --token TOKEN           agent token (else $SWITCHYARD_AGENT_TOKEN; none: auth mode "none")
  --labels a,b            labels offered to jobs
  --max-concurrency N     parallel jobs (default 1)
  --work-dir DIR          parent of job workspaces (default <tmpdir>/switchyard-agent)
  --agent-id ID           default <hostname>-<random>
  --heartbeat-ms MS       job.heartbeat period (default 60000)
  --agent-heartbeat-ms MS heartbeat period while registered (default 30000)
  --reconnect-base-ms MS  first reconnect delay before jitter (default 1000)
  --log-level LEVEL       pino level (default info)

signals: SIGUSR1 drains (finish jobs, refuse new ones, exit when idle); SIGTERM/SIGINT stop jobs and exit.
exit codes: 0 stopped, 2 usage error, 3 authentication refused.
`;

const ARG_OPTIONS = {
  url: { type: 'string' },
  token: { type: 'string' },
  labels: { type: 'string' },
  'max-concurrency': { type: 'string' },
  'work-dir': { type: 'string' },
  'agent-id': { type: 'string' },
  'heartbeat-ms': { type: 'string' },
  'agent-heartbeat-ms': { type: 'string' },
  'reconnect-base-ms': { type: 'string' },
  'log-level': { type: 'string' },
  help: { type: 'boolean' },
} as const;

type ParsedArgs = ReturnType<typeof parseArgs<{ options: typeof ARG_OPTIONS }>>['values'];

/** `switchyard agent …`: runs the reference agent until it is drained, stopped or refused. */
export async function runAgentCommand(argv: string[], env: NodeJS.ProcessEnv = process.env): Promise<number> {
  let args: ParsedArgs;
  let options: ReturnType<typeof compileAgentOptions>;
  try {
    args = parseArgs({ args: argv, options: ARG_OPTIONS, strict: true, allowPositionals: false }).values;
    if (args.help === true) {
      process.stdout.write(AGENT_USAGE);
      return AGENT_EXIT.OK;
    }
    options = compileAgentOptions(toOptions(args, env));
  } catch (thrown: unknown) {
    if (!(thrown instanceof AgentOptionsError) && !isArgError(thrown)) throw thrown;
    process.stderr.write(`switchyard agent: ${thrown.message}\n${AGENT_USAGE}`);
    return AGENT_EXIT.USAGE;
  }
  const log = pino({ level: args['log-level'] ?? 'info' }, pino.destination(2));
  const agent = new Agent(options, { log, env });
  const onDrain = () => agent.drain();
  const onStop = () => agent.shutdown();
  process.on('SIGUSR1', onDrain);
  process.on('SIGTERM', onStop);
  process.on('SIGINT', onStop);
  try {
    return await agent.run();
  } finally {
    process.off('SIGUSR1', onDrain);
    process.off('SIGTERM', onStop);
    process.off('SIGINT', onStop);
  }
}

function toOptions(args: ParsedArgs, env: NodeJS.ProcessEnv): AgentOptions {
  const token = args.token ?? env.SWITCHYARD_AGENT_TOKEN;
  return {
    url: args.url ?? '',
    ...(token !== undefined && token !== '' && { token }),
    labels: (args.labels ?? '').split(',').map((label) => label.trim()).filter((label) => label !== ''),
    ...numberOption('maxConcurrency', args['max-concurrency']),
    ...(args['work-dir'] !== undefined && { workDir: args['work-dir'] }),
    ...(args['agent-id'] !== undefined && { agentId: args['agent-id'] }),
    ...numberOption('jobHeartbeatMs', args['heartbeat-ms']),
    ...numberOption('heartbeatMs', args['agent-heartbeat-ms']),
    ...numberOption('reconnectBaseMs', args['reconnect-base-ms']),
  };
}

function numberOption(key: keyof AgentOptions, value: string | undefined): Partial<AgentOptions> {
  if (value === undefined) return {};
  const parsed = Number(value);
  if (!Number.isFinite(parsed)) throw new AgentOptionsError(`${key}: not a number: ${value}`);
  return { [key]: parsed };
}

function isArgError(thrown: unknown): thrown is Error {
  return thrown instanceof TypeError && typeof (thrown as NodeJS.ErrnoException).code === 'string';
}
