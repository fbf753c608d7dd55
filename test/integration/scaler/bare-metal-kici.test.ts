import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { pino } from 'pino';
import { BareMetalBackend } from '../../../src/scaler/bare-metal.ts';
import { compileScalerDefinitions } from '../../../src/config/scaler-definitions.ts';
import { processAlive } from '../../../src/scaler/process-table.ts';
import { tempDir } from '../../support/database.ts';
import { eventually } from '../../support/runtime.ts';

/** Stands in for a KiCI agent install: records its environment and working directory, then waits to be destroyed. */
const RECORDER = `require('node:fs').writeFileSync(process.env.RECORD_TO, JSON.stringify({ env: process.env, cwd: process.cwd(), argv: process.argv.slice(1) })); setInterval(() => {}, 1000);`;
const TOKEN = `kat_${'b'.repeat(64)}`;

async function backendFor(agentEnv: Record<string, string>, host: Record<string, string>) {
  const stateDir = await tempDir('sy-kici-bm-');
  const [definition] = compileScalerDefinitions(
    [{ type: 'bare-metal', name: 'kici', labels: ['linux', 'big'], agent: { kind: 'kici', command: [process.execPath, '-e', RECORDER, 'extra-arg'], env: agentEnv } }],
    'build-host',
  );
  assert.ok(definition?.type === 'bare-metal');
  const backend = new BareMetalBackend({
    ...{ name: definition.name, installationId: 'sy-kici-test', labelSets: definition.labelSets, maxAgents: 2, agent: definition.agent },
    ...{ repoRoot: '/nonexistent-checkout', stateDir, baseEnv: host, killGraceMs: 2_000, now: () => Date.now(), log: pino({ level: 'silent' }) },
  });
  return { backend, stateDir };
}

type Recorded = { env: Record<string, string>; cwd: string; argv: string[] };

async function recorded(path: string): Promise<Recorded> {
  return eventually(async () => {
    const text = await readFile(path, 'utf8').catch(() => null);
    return text ? (JSON.parse(text) as Recorded) : null;
  }, 20_000, 'the agent process to record its environment');
}

describe('bare-metal backend with a KiCI agent command (real processes)', () => {
  it('spawns the command with the stock environment contract, ownership marks and nothing else of ours; destroy ends it', async () => {
    const dir = await tempDir('sy-kici-record-');
    const recordTo = join(dir, 'env.json');
    const { backend, stateDir } = await backendFor({ RECORD_TO: recordTo, KICI_LOG_LEVEL: 'debug' }, { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: '/home/agent' });
    const labelSet = backend.labelSets[0];
    assert.ok(labelSet);
    const agentId = 'scaler-bare-metal-0000cafe';
    const spawned = await backend.spawn(labelSet, agentId, 'ws://127.0.0.1:8080/ws', { cpu: 0, memoryBytes: 0 }, { boundJobId: 'build', runId: 'run-1' }, { token: TOKEN });
    try {
      const { env, cwd, argv } = await recorded(recordTo);
      assert.deepEqual(argv, ['extra-arg'], 'the configured arguments, nothing appended');
      assert.equal(cwd, join(stateDir, 'work', agentId), 'its own work dir by default');
      const kici = Object.fromEntries(Object.entries(env).filter(([name]) => name.startsWith('KICI_')));
      assert.deepEqual(Object.keys(kici).sort(), ['KICI_AGENT_ID', 'KICI_AGENT_TOKEN', 'KICI_LABELS', 'KICI_LOG_LEVEL', 'KICI_ORCHESTRATOR_URL', 'KICI_PORT']);
      assert.equal(kici['KICI_ORCHESTRATOR_URL'], 'ws://127.0.0.1:8080/ws', 'verbatim');
      assert.equal(kici['KICI_AGENT_TOKEN'], TOKEN);
      assert.equal(kici['KICI_AGENT_ID'], agentId);
      assert.equal(kici['KICI_LABELS'], 'linux,big', 'configured labels only, no kici: ones');
      assert.match(kici['KICI_PORT'] ?? '', /^\d+$/);
      assert.notEqual(kici['KICI_PORT'], '8080', 'its own health port, not the shared default');
      assert.equal(env['HOME'], '/home/agent', 'the passed host variables');
      assert.equal(env['SWITCHYARD_AGENT_TOKEN'], undefined, 'the token travels only as KICI_AGENT_TOKEN');
      assert.equal(env['SWITCHYARD_OWNER'], 'sy-kici-test');
      assert.equal(env['SWITCHYARD_BOUND_JOB_ID'], 'build');
      const owned = await backend.listOwned();
      assert.deepEqual(owned, [{ agentId, backendRef: spawned.backendRef, scaler: 'kici', boundJobId: 'build', runId: 'run-1' }]);
    } finally {
      await backend.destroy(agentId);
    }
    assert.equal(await processAlive(Number(spawned.backendRef)), false, 'destroyed');
    assert.deepEqual(await backend.listOwned(), []);
  });

  it('a configured KICI_PORT is kept', async () => {
    const recordTo = join(await tempDir('sy-kici-record-'), 'env.json');
    const { backend } = await backendFor({ KICI_PORT: '18123', RECORD_TO: recordTo }, { PATH: process.env.PATH ?? '/usr/bin:/bin' });
    const labelSet = backend.labelSets[0];
    assert.ok(labelSet);
    await backend.spawn(labelSet, 'scaler-bare-metal-0000f00d', 'ws://127.0.0.1:9/ws', { cpu: 0, memoryBytes: 0 }, null, { token: TOKEN });
    try {
      const { env } = await recorded(recordTo);
      assert.equal(env['KICI_PORT'], '18123');
      assert.equal(env['SWITCHYARD_BOUND_JOB_ID'], undefined, 'a warm-pool spawn is bound to nothing');
    } finally {
      await backend.shutdownAll();
    }
  });

  it('an agent that exits on its own is reported with its last output', async () => {
    const { backend } = await backendFor({ RECORD_TO: '/nonexistent-dir/env.json' }, { PATH: process.env.PATH ?? '/usr/bin:/bin' });
    const exits: string[] = [];
    backend.onExit((agentId, detail) => exits.push(`${agentId}: ${detail}`));
    const labelSet = backend.labelSets[0];
    assert.ok(labelSet);
    await backend.spawn(labelSet, 'scaler-bare-metal-0000beef', 'ws://127.0.0.1:9/ws', { cpu: 0, memoryBytes: 0 }, null, { token: TOKEN });
    const [exit] = await eventually(() => (exits.length > 0 ? exits : null), 20_000, 'the failing agent to exit');
    assert.match(exit ?? '', /^scaler-bare-metal-0000beef: agent process exited with code 1; last output: .*ENOENT.*nonexistent-dir/s);
    assert.equal(backend.getActiveCount(), 0);
    await backend.shutdownAll();
  });

  it('a program that cannot start fails the spawn with a readable error', async () => {
    const stateDir = await tempDir('sy-kici-bm-');
    const backend = new BareMetalBackend({
      ...{ name: 'kici', installationId: 'sy-kici-test', maxAgents: 1, repoRoot: '/nonexistent-checkout', stateDir, baseEnv: { PATH: '/nonexistent-bin' } },
      ...{ labelSets: [{ labels: ['kici:os:linux', 'kici:role:builder'], mandatoryLabels: [], properties: {}, resources: null, warmPool: null }] },
      ...{ agent: { kind: 'kici', command: ['kici-agent-not-installed'], env: {}, workingDir: null }, killGraceMs: 1_000, now: () => Date.now(), log: pino({ level: 'silent' }) },
    });
    const labelSet = backend.labelSets[0];
    assert.ok(labelSet);
    await assert.rejects(backend.spawn(labelSet, 'scaler-bare-metal-0000dead', 'ws://127.0.0.1:9/ws', { cpu: 0, memoryBytes: 0 }, null, { token: TOKEN }), /cannot start the agent process: spawn kici-agent-not-installed ENOENT/);
    await backend.shutdownAll();
  });
});
