import assert from 'node:assert/strict';
import { tmpdir } from 'node:os';
import { describe, it } from 'node:test';
import { autoLabels } from '../../../lib/self-reported-labels.ts';
import { ConfigError, loadConfig } from '../../../src/config/index.ts';
import { KNOWN_KICI_VARIABLES, kiciContractEnv, kiciRoles, withoutUnknownKici } from '../../../src/config/agent-launch.ts';
import type { KiciLaunch } from '../../../src/config/agent-launch.ts';
import { validateLabelSets } from '../../../src/scaler/backend.ts';
import { compileScalerDefinitions } from '../../../src/config/scaler-definitions.ts';

const KICI = { kind: 'kici', command: [process.execPath, '/opt/kici-agent/server.js'] };
const ROLES = ['kici:role:builder', 'kici:role:init-runner'];

/** The message `switchyard start` would print for this `SWITCHYARD_SCALERS`. */
function configError(definitions: unknown[]): string {
  try {
    loadConfig({ SWITCHYARD_SCALERS: JSON.stringify(definitions) });
  } catch (error) {
    assert.ok(error instanceof ConfigError && error.key === 'SWITCHYARD_SCALERS', String(error));
    return error.message;
  }
  assert.fail('the definitions were accepted');
}

describe('scaler agent: label sets and properties', () => {
  it('the reference agent keeps its labels and declares run steps; agent defaults to it', () => {
    const [implicit, explicit] = compileScalerDefinitions(
      [
        { type: 'bare-metal', name: 'a', labels: ['linux'] },
        { type: 'bare-metal', name: 'b', labels: ['linux'], agent: { kind: 'reference' } },
      ],
      'build-host',
    );
    for (const def of [implicit, explicit]) {
      assert.deepEqual(def?.agent, { kind: 'reference' });
      assert.deepEqual(def?.labelSets[0]?.labels, [...autoLabels('build-host'), 'linux']);
      assert.deepEqual(def?.labelSets[0]?.properties, { 'switchyard.runSteps': true });
    }
  });

  it('a bare-metal KiCI agent: no properties, the stock self-reported labels with host and both roles', () => {
    const [def] = compileScalerDefinitions([{ type: 'bare-metal', name: 'kici', labels: ['linux'], agent: KICI }], 'build-host');
    assert.deepEqual(def?.agent, { kind: 'kici', command: KICI.command, env: {}, workingDir: null });
    assert.deepEqual(def?.labelSets[0]?.properties, {});
    assert.deepEqual(def?.labelSets[0]?.labels, [...autoLabels('build-host'), ...ROLES, 'linux']);
    assert.ok(def?.labelSets[0]?.labels.includes('kici:host:build-host'));
    if (process.arch === 'x64') assert.ok(def?.labelSets[0]?.labels.includes('kici:arch:amd64'), 'x64 also reports amd64');
  });

  it('a container KiCI agent has no kici:host label; without command the image runs its own', () => {
    const [def] = compileScalerDefinitions([{ type: 'container', name: 'kc', image: 'kici-agent:1', agent: { kind: 'kici' }, labelSets: [{ labels: ['gpu'], mandatoryLabels: ['gpu'] }] }], 'build-host');
    assert.equal(def?.type, 'container');
    assert.deepEqual(def?.agent, { kind: 'kici', command: null, env: {}, workingDir: null });
    assert.deepEqual(def?.labelSets[0]?.labels, [...autoLabels('x').filter((l) => !l.startsWith('kici:host:')), ...ROLES, 'gpu']);
    assert.deepEqual(def?.labelSets[0]?.mandatoryLabels, ['gpu']);
  });

  it('KICI_ROLES decides the role labels: unset or all = both, a list = those, empty = none', () => {
    const roles = (value: string | undefined) => {
      const env = value === undefined ? {} : { KICI_ROLES: value };
      const [def] = compileScalerDefinitions([{ type: 'bare-metal', name: 'k', agent: { ...KICI, env } }], 'h');
      return def?.labelSets[0]?.labels.filter((l) => l.startsWith('kici:role:'));
    };
    assert.deepEqual(roles(undefined), ROLES);
    assert.deepEqual(roles('all'), ROLES);
    assert.deepEqual(roles('init-runner'), ['kici:role:init-runner']);
    assert.deepEqual(roles(' builder , builder'), ['kici:role:builder']);
    assert.deepEqual(roles(''), []);
    assert.deepEqual(kiciRoles('builder,all'), ['builder', 'init-runner']);
  });

  it('label set validation lets a KiCI agent register its roles, and only those', () => {
    const set = (labels: string[]) => [{ labels, mandatoryLabels: [], properties: {}, resources: null, warmPool: null }];
    assert.deepEqual(validateLabelSets(set(['kici:os:linux', ...ROLES]), 'kici'), { ok: true });
    const reference = validateLabelSets(set(['kici:os:linux', 'kici:role:builder']));
    assert.equal(reference.ok, false);
    const foreign = validateLabelSets(set(['kici:os:linux', 'kici:role:deployer', 'kici:init']), 'kici');
    assert.deepEqual(foreign, { ok: false, errors: ['labelSets[0]: the agent cannot register kici:role:deployer, kici:init (only kici:os|arch|host and its roles are self-reported)'] });
  });
});

describe('scaler agent: the KiCI environment contract', () => {
  const agent: KiciLaunch = { kind: 'kici', command: ['kici-agent'], env: { KICI_LOG_LEVEL: 'debug', NODE_OPTIONS: '--max-old-space-size=2048' }, workingDir: null };
  const spawn = { orchestratorUrl: 'ws://10.0.0.5:8080/ws', token: `kat_${'a'.repeat(64)}`, agentId: 'scaler-bare-metal-0000abcd', labels: ['linux', 'big'] };

  it('the contract variables, verbatim, after the configured env; KICI_LABELS joins the configured labels', () => {
    assert.deepEqual(kiciContractEnv(agent, spawn), {
      KICI_LOG_LEVEL: 'debug',
      NODE_OPTIONS: '--max-old-space-size=2048',
      KICI_ORCHESTRATOR_URL: 'ws://10.0.0.5:8080/ws',
      KICI_AGENT_TOKEN: spawn.token,
      KICI_AGENT_ID: 'scaler-bare-metal-0000abcd',
      KICI_LABELS: 'linux,big',
    });
    assert.equal(kiciContractEnv(agent, { ...spawn, labels: [] })['KICI_LABELS'], undefined, 'no empty KICI_LABELS');
  });

  it('only known KICI_* variables survive; other variables are untouched', () => {
    const env = withoutUnknownKici({ KICI_AGENT_ID: 'a', KICI_PORT: '1', KICI_SOMETHING_ELSE: 'x', PATH: '/bin', SWITCHYARD_OWNER: 'sy' });
    assert.deepEqual(env, { KICI_AGENT_ID: 'a', KICI_PORT: '1', PATH: '/bin', SWITCHYARD_OWNER: 'sy' });
    for (const name of ['KICI_ORCHESTRATOR_URL', 'KICI_AGENT_TOKEN', 'KICI_AGENT_ID', 'KICI_LABELS', 'KICI_ROLES']) assert.ok(KNOWN_KICI_VARIABLES.has(name), name);
  });
});

describe('scaler agent: configuration errors', () => {
  const bare = (agent: unknown) => [{ type: 'bare-metal', name: 'k', agent }];

  it('a bad command is refused with the field and the reason', () => {
    assert.match(configError(bare({ kind: 'kici' })), /^Invalid SWITCHYARD_SCALERS: 0\.agent\.command: the KiCI agent program, then its arguments/);
    assert.match(configError(bare({ kind: 'kici', command: [] })), /0\.agent\.command: the KiCI agent program/);
    assert.match(configError(bare({ kind: 'kici', command: 'kici-agent --fast' })), /0\.agent\.command: the KiCI agent program/);
    assert.match(configError(bare({ kind: 'kici', command: ['bin/kici-agent'] })), /0\.agent\.command\.0: bin\/kici-agent: use an absolute path or a program name found on PATH/);
    assert.match(configError(bare({ kind: 'kici', command: ['/nonexistent/kici-agent'] })), /0\.agent\.command\.0: \/nonexistent\/kici-agent is not an executable file on this host \(ENOENT\)/);
    assert.match(configError(bare({ kind: 'kici', command: [tmpdir(), 'x'] })), /0\.agent\.command\.0: .* is not an executable file on this host \(a directory\)/);
  });

  it('an unknown kind, an unknown field and a command on a reference agent are refused', () => {
    assert.match(configError(bare({ kind: 'stock' })), /0\.agent\.kind: agent\.kind is "reference" \(the default\) or "kici"/);
    assert.match(configError(bare({ ...KICI, image: 'x' })), /0\.agent: .*image/i);
    assert.match(configError(bare({ kind: 'reference', command: ['x'] })), /0\.agent: .*command/i);
    const container = [{ type: 'container', name: 'c', image: 'i', command: ['node'], agent: { kind: 'kici' } }];
    assert.match(configError(container), /0\.command: command starts the reference agent; a KiCI agent takes agent\.command/);
    assert.match(configError([{ type: 'container', name: 'c', image: 'i', agent: { kind: 'kici', workingDir: '/srv' } }]), /0\.agent: .*workingDir/i);
  });

  it('env: the contract, ownership marks and unknown KICI_* names are refused, with the reason', () => {
    assert.match(configError(bare({ ...KICI, env: { KICI_AGENT_TOKEN: 'kat_x' } })), /0\.agent\.env\.KICI_AGENT_TOKEN: KICI_AGENT_TOKEN is set by the scaler for each agent/);
    assert.match(configError(bare({ ...KICI, env: { KICI_ORCHESTRATOR_URL: 'ws://x' } })), /is set by the scaler/);
    assert.match(configError(bare({ ...KICI, env: { SWITCHYARD_OWNER: 'x' } })), /SWITCHYARD_\* variables are the scaler's ownership marks/);
    assert.match(configError(bare({ ...KICI, env: { KICI_LABLES: 'linux' } })), /KICI_LABLES is not a variable the KiCI agent knows, and it refuses to start with an unknown KICI_\* variable/);
    assert.match(configError(bare({ ...KICI, env: { 'NOT-A-NAME': 'x' } })), /0\.agent\.env\.NOT-A-NAME: NOT-A-NAME is not an environment variable name/);
    assert.match(configError(bare({ ...KICI, env: { KICI_ROLES: 'builder,deployer' } })), /0\.agent\.env\.KICI_ROLES: unknown roles deployer/);
    assert.match(configError(bare({ ...KICI, env: { PORT: 1 } })), /0\.agent\.env\.PORT: .*string/);
  });

  it('workingDir must be an absolute directory on this host', () => {
    assert.match(configError(bare({ ...KICI, workingDir: 'work' })), /0\.agent\.workingDir: an absolute path/);
    assert.match(configError(bare({ ...KICI, workingDir: '/nonexistent/work' })), /0\.agent\.workingDir: \/nonexistent\/work is not a directory on this host/);
    const [def] = compileScalerDefinitions(bare({ ...KICI, workingDir: tmpdir() }), 'h');
    assert.equal(def?.agent.kind === 'kici' && def.agent.workingDir, tmpdir());
  });
});
