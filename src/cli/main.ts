import { loadConfig } from '../config/index.ts';
import { createLogger } from '../log.ts';
import { startCoordinator } from '../main.ts';
import { runAgentCommand } from './agent.ts';
import { runDiagnoseCommand } from './diagnose.ts';
import { runReplayCommand } from './replay.ts';
import { runVisualizeCommand } from './visualize.ts';
import { runTokenCommand } from './token.ts';

const USAGE = `usage: switchyard <command>

commands:
  start                    run a coordinator (HTTP on $HOST:$PORT, data in $SWITCHYARD_DATA_DIR)
  agent --url U --token T  run the reference agent (see 'switchyard agent --help')
  token create|list        manage agent tokens through a running coordinator
  diagnose                 scaler backends and their recent spawn failures (see 'switchyard diagnose --help')
  replay <runId>           re-run a run's journal through the charts (see 'switchyard replay --help')
  visualize --out <dir>    write an offline copy of the visualizer for one run (--run <runId>)
`;

/** Exit status of a coordinator that found itself fenced by a newer owner. */
const EXIT_FENCED = 3;

async function start(): Promise<void> {
  const config = loadConfig();
  const log = createLogger(config.logLevel, { coordinatorId: config.coordinatorId });
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
  const [command] = argv;
  switch (command) {
    case 'start':
      return start();
    case 'agent':
      process.exitCode = await runAgentCommand(argv.slice(1));
      return;
    case 'token':
      process.exitCode = await runTokenCommand(argv.slice(1));
      return;
    case 'diagnose':
      process.exitCode = await runDiagnoseCommand(argv.slice(1));
      return;
    case 'replay':
      process.exitCode = await runReplayCommand(argv.slice(1));
      return;
    case 'visualize':
      process.exitCode = await runVisualizeCommand(argv.slice(1));
      return;
    case undefined:
    case 'help':
    case '--help':
      process.stdout.write(USAGE);
      return;
    default:
      process.stderr.write(`unknown command: ${command}\n${USAGE}`);
      process.exitCode = 2;
  }
}

main(process.argv.slice(2)).catch((thrown: unknown) => {
  const error = thrown instanceof Error ? thrown : new Error(String(thrown));
  process.stderr.write(`switchyard: ${error.name}: ${error.message}\n`);
  process.exit(1);
});
