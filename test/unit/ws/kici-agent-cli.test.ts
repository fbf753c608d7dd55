import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { after, describe, it } from 'node:test';
import { WebSocketServer, type WebSocket } from 'ws';
import { dispatchSchema, parseAgentMessage } from '../../../src/ws/messages.ts';
import type { AgentMessage } from '../../../src/ws/messages.ts';
import { wireRecords } from '../../support/kici-wire-fixture.ts';

const ROOT = fileURLToPath(new URL('../../..', import.meta.url));
const CLI = ['--no-node-snapshot', '--import', 'tsx', 'test/support/kici-agent-cli.ts'];

/** The process environment without any `KICI_*` variable, plus `env`. */
function cleanEnv(env: Record<string, string>): NodeJS.ProcessEnv {
  const base = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith('KICI_')));
  return { ...base, ...env };
}

function startCli(env: Record<string, string>) {
  const child = spawn(process.execPath, CLI, { cwd: ROOT, env: cleanEnv(env), stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return { child, exited, output: () => output };
}

/** A scripted orchestrator: records the agent's parsed frames and lets the test answer. */
async function scriptedOrchestrator() {
  const server = new WebSocketServer({ host: '127.0.0.1', port: 0 });
  await new Promise((resolve) => server.once('listening', resolve));
  const frames: AgentMessage[] = [];
  const failures: string[] = [];
  let socket: WebSocket | undefined;
  server.on('connection', (ws) => {
    socket = ws;
    ws.on('message', (data: Buffer) => {
      const parsed = parseAgentMessage(data.toString('utf8'));
      if (parsed.ok) frames.push(parsed.message);
      else if (!parsed.ignored) failures.push(parsed.reason);
    });
  });
  const next = async <T extends AgentMessage['type']>(type: T, where: (m: Extract<AgentMessage, { type: T }>) => boolean = () => true) => {
    for (let tries = 0; tries < 3000; tries += 1) {
      assert.deepEqual(failures, [], 'every frame of the CLI agent parses');
      const found = frames.find((m): m is Extract<AgentMessage, { type: T }> => m.type === type && where(m as Extract<AgentMessage, { type: T }>));
      if (found) return found;
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    throw new Error(`no ${type} from the CLI agent; got ${frames.map((m) => m.type).join(', ')}`);
  };
  const send = (frame: object) => socket?.send(JSON.stringify(frame));
  const url = `ws://127.0.0.1:${(server.address() as AddressInfo).port}/any/path`;
  return { url, next, send, close: () => new Promise((resolve) => server.close(resolve)) };
}

const cleanups: (() => Promise<unknown>)[] = [];
after(async () => {
  for (const cleanup of cleanups.splice(0)) await cleanup();
});

describe('kici-agent-cli: the test agent as a process configured like the stock agent', () => {
  it('registers with KICI_* settings, answers an init job with KICI_TEST_INIT_RESULT, and exits 0 on SIGTERM', async () => {
    const orchestrator = await scriptedOrchestrator();
    cleanups.push(orchestrator.close);
    const initResult = { matrixValues: [{ os: 'linux' }, { os: 'mac' }] };
    const agentId = `cli-${randomUUID().slice(0, 8)}`;
    const cli = startCli({
      ...{ KICI_ORCHESTRATOR_URL: orchestrator.url, KICI_AGENT_ID: agentId, KICI_LABELS: 'lab,gpu', KICI_ROLES: 'init-runner' },
      KICI_TEST_INIT_RESULT: JSON.stringify(initResult),
    });
    cleanups.push(() => Promise.resolve(cli.child.kill('SIGKILL')));
    const register = await orchestrator.next('agent.register');
    assert.equal(register.agentId, agentId);
    assert.deepEqual(register.labels.filter((l) => !/^kici:(os|arch|host):/.test(l)), ['lab', 'gpu', 'kici:role:init-runner']);
    orchestrator.send({ type: 'register.ack', agentId, labels: register.labels, scalerManaged: true });
    await orchestrator.next('config.ack');

    const recorded = wireRecords().find((r) => r.msg.type === 'job.dispatch' && r.msg['sourceTarUrl'] !== undefined)?.msg;
    const jobConfig = { initOnly: true, targetJobName: 'build', workflowName: 'bench', source: '.kici/workflows/bench.ts', dynamicMatrix: true, timeoutMs: 60_000 };
    const dispatch = dispatchSchema.parse({ ...recorded, jobId: randomUUID(), runId: randomUUID(), jobConfig });
    orchestrator.send(dispatch);
    const status = await orchestrator.next('job.status', (m) => m.state === 'success');
    assert.deepEqual(status.data, { initComplete: true, initResult });

    cli.child.kill('SIGTERM');
    assert.equal(await cli.exited, 0, cli.output());
  });

  it('refuses to start with an unknown KICI_* variable, as the stock agent does', async () => {
    const cli = startCli({ KICI_ORCHESTRATOR_URL: 'ws://127.0.0.1:1/ws', KICI_SURPRISE: '1' });
    assert.equal(await cli.exited, 1);
    assert.match(cli.output(), /KICI_SURPRISE/);
  });

  it('refuses a configured label with the reserved kici: prefix', async () => {
    const cli = startCli({ KICI_ORCHESTRATOR_URL: 'ws://127.0.0.1:1/ws', KICI_LABELS: 'lab,kici:os:linux' });
    assert.equal(await cli.exited, 1);
    assert.match(cli.output(), /kici: prefix is reserved/);
  });
});
