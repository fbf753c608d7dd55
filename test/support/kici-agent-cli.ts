import { parseArgs } from 'node:util';
import { KNOWN_KICI_VARIABLES, kiciRoles } from '../../src/config/agent-launch.ts';
import { KiciTestAgent } from './kici-agent.ts';
import { succeedAll, type InitResult } from './kici-agent-scripts.ts';

/**
 * `node --no-node-snapshot --import tsx test/support/kici-agent-cli.ts`: the test agent configured like
 * the stock agent by `KICI_*` variables. Init jobs answer with `KICI_TEST_INIT_RESULT` or `--init-result`
 * (JSON, default `{}`); the argument survives a scaler that drops unknown `KICI_*` variables.
 */
const ROLE_NAMES = new Set(['builder', 'init-runner']);
const TEST_VARIABLES = new Set(['KICI_TEST_INIT_RESULT']);

function refuse(message: string): never {
  process.stderr.write(`kici-test-agent: ${message}\n`);
  process.exit(1);
}

function initResultFrom(text: string, where: string): InitResult {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (thrown: unknown) {
    refuse(`${where} is not JSON: ${thrown instanceof Error ? thrown.message : String(thrown)}`);
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) refuse(`${where} must be a JSON object`);
  return value as InitResult;
}

function compile(env: NodeJS.ProcessEnv, argv: string[]): ConstructorParameters<typeof KiciTestAgent>[0] & { initResult: InitResult } {
  // Like the stock agent: any KICI_* name it does not know is a configuration mistake.
  const unknown = Object.keys(env).filter((name) => name.startsWith('KICI_') && !KNOWN_KICI_VARIABLES.has(name) && !TEST_VARIABLES.has(name));
  if (unknown.length > 0) refuse(`unknown configuration variable(s) ${unknown.sort().join(', ')}; refusing to start`);
  const url = env['KICI_ORCHESTRATOR_URL'];
  if (!url) refuse('KICI_ORCHESTRATOR_URL is required');
  const labels = (env['KICI_LABELS'] ?? '').split(',').map((label) => label.trim()).filter((label) => label !== '');
  const reserved = labels.filter((label) => label.startsWith('kici:'));
  if (reserved.length > 0) refuse(`KICI_LABELS: the kici: prefix is reserved (${reserved.join(', ')})`);
  const roles = kiciRoles(env['KICI_ROLES']);
  const badRoles = roles.filter((role) => !ROLE_NAMES.has(role));
  if (badRoles.length > 0) refuse(`KICI_ROLES: unknown role(s) ${badRoles.join(', ')} (builder, init-runner, all, or empty)`);
  const { values } = parseArgs({ args: argv, options: { 'init-result': { type: 'string' } }, strict: true });
  const initText = values['init-result'] ?? env['KICI_TEST_INIT_RESULT'] ?? '{}';
  const initResult = initResultFrom(initText, values['init-result'] === undefined ? 'KICI_TEST_INIT_RESULT' : '--init-result');
  const token = env['KICI_AGENT_TOKEN'] || undefined;
  const agentId = env['KICI_AGENT_ID'] || undefined;
  return { url, labels, roles, initResult, ...(token && { token }), ...(agentId && { agentId }) };
}

const { initResult, ...options } = compile(process.env, process.argv.slice(2));
const agent = new KiciTestAgent({ ...options, script: succeedAll(initResult) });
// The stock agent stays up after a permanent refusal (4010): only a signal ends the process.
const keepAlive = setInterval(() => undefined, 1 << 30);

const stop = () => {
  clearInterval(keepAlive);
  void agent.close({ abrupt: true }).then(() => process.exit(0));
};
process.once('SIGTERM', stop);
process.once('SIGINT', stop);
process.on('SIGUSR1', () => agent.drain());

agent.start(24 * 60 * 60 * 1000).then(
  (ack) => process.stdout.write(`kici-test-agent: ${agent.agentId} registered (labels ${ack.labels.join(',')})\n`),
  (thrown: unknown) => process.stderr.write(`kici-test-agent: ${thrown instanceof Error ? thrown.message : String(thrown)}\n`),
);
