import { loadConfig } from '../config/index.ts';
import { createLogger } from '../log.ts';
import { unsupportedNode } from './node-support.ts';

const USAGE = `usage: switchyard <command>

commands:
  start                    run a coordinator (HTTP on $HOST:$PORT, data in $SWITCHYARD_DATA_DIR)
  agent --url U --token T  run the reference agent (see 'switchyard agent --help')
  token create|list        manage agent tokens through a running coordinator
  runs                     recent runs (--repo owner/name, --status S, --limit N)
  run <id>                 one run with its jobs, steps and outputs
  logs <id>                job logs as plain text (--job J, -f/--follow)
  cancel <id>              cancel a run (--force)
  rerun <id>               a new run of an ended run's workflow and source (--failed)
  agents                   connected agents (list; disconnect <agentId>)
  diagnose                 scaler backends and their recent spawn failures (see 'switchyard diagnose --help')
  replay <runId>           re-run a run's journal through the charts (see 'switchyard replay --help')
  visualize --out <dir>    write an offline copy of the visualizer for one run (--run <runId>)
  backup --out FILE        back up the running coordinator's database and blob files (--with-master-key)
  restore FILE             put a backup back, with the coordinators stopped (--force)
  retention                one retention pass now (--older-than DURATION, --dry-run)

Each command takes --help. Commands that talk to a running coordinator find it at --url, else
$SWITCHYARD_URL, else http://$HOST:$PORT, with the admin token of $SWITCHYARD_DATA_DIR.
`;

/**
 * Commands that run to an exit status; `start` runs until it is stopped. Each is loaded when it is
 * called, so that `switchyard runs` does not load the coordinator.
 */
const COMMANDS: Readonly<Record<string, (argv: string[]) => Promise<number>>> = {
  agent: async (argv) => (await import('./agent.ts')).runAgentCommand(argv),
  token: async (argv) => (await import('./token.ts')).runTokenCommand(argv),
  runs: async (argv) => (await import('./runs.ts')).runRunsCommand(argv),
  run: async (argv) => (await import('./runs.ts')).runRunCommand(argv),
  logs: async (argv) => (await import('./logs.ts')).runLogsCommand(argv),
  cancel: async (argv) => (await import('./runs.ts')).runCancelCommand(argv),
  rerun: async (argv) => (await import('./runs.ts')).runRerunCommand(argv),
  agents: async (argv) => (await import('./agents.ts')).runAgentsCommand(argv),
  diagnose: async (argv) => (await import('./diagnose.ts')).runDiagnoseCommand(argv),
  replay: async (argv) => (await import('./replay.ts')).runReplayCommand(argv),
  visualize: async (argv) => (await import('./visualize.ts')).runVisualizeCommand(argv),
  backup: async (argv) => (await import('./backup.ts')).runBackupCommand(argv),
  restore: async (argv) => (await import('./backup.ts')).runRestoreCommand(argv),
  retention: async (argv) => (await import('./retention.ts')).runRetentionCommand(argv),
};

/** Exit status of a coordinator that found itself fenced by a newer owner. */
const EXIT_FENCED = 3;

async function start(): Promise<void> {
  const config = loadConfig();
  const log = createLogger(config.logLevel, { coordinatorId: config.coordinatorId });
  const { startCoordinator } = await import('../main.ts');
  const coordinator = await startCoordinator(config, log, undefined, { onFenced: () => process.exit(EXIT_FENCED) });
  const stopNow = new AbortController();
  const shutdown = (signal: string) => {
    if (stopNow.signal.aborted) return;
    if (shuttingDown) {
      log.warn({ signal }, 'second signal: stopping without waiting for running jobs');
      stopNow.abort();
      return;
    }
    shuttingDown = true;
    log.info({ signal }, 'shutting down');
    void coordinator.close({ drainMs: config.shutdownDrainMs, abort: stopNow.signal }).then(() => process.exit(process.exitCode ?? 0));
  };
  let shuttingDown = false;
  process.on('SIGINT', () => shutdown('SIGINT'));
  process.on('SIGTERM', () => shutdown('SIGTERM'));
}

async function main(argv: string[]): Promise<void> {
  const unsupported = unsupportedNode(process.version);
  if (unsupported !== null) {
    process.stderr.write(`switchyard: ${unsupported}\n`);
    process.exitCode = 1;
    return;
  }
  const [command] = argv;
  if (command === 'start') return start();
  if (command === undefined || command === 'help' || command === '--help') {
    process.stdout.write(USAGE);
    return;
  }
  const run = Object.hasOwn(COMMANDS, command) ? COMMANDS[command] : undefined;
  if (run) {
    process.exitCode = await run(argv.slice(1));
    return;
  }
  process.stderr.write(`unknown command: ${command}\n${USAGE}`);
  process.exitCode = 2;
}

main(process.argv.slice(2)).catch((thrown: unknown) => {
  const error = thrown instanceof Error ? thrown : new Error(String(thrown));
  process.stderr.write(`switchyard: ${error.name}: ${error.message}\n`);
  process.exit(1);
});
