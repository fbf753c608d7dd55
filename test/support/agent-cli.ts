import { runAgentCommand } from '../../src/cli/agent.ts';

/** Runs `switchyard agent` in a child process for tests, until src/cli/main.ts routes `agent`. */
process.exitCode = await runAgentCommand(process.argv.slice(2));
