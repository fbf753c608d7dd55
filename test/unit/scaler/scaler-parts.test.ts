import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { candidatesFor } from '../../../actors/scaler/placement.ts';
import { ownershipEnv, ownershipLabels } from '../../../src/scaler/backend.ts';
import { compileScalerDefinitions, passedHostEnv } from '../../../src/config/scaler-definitions.ts';
import { FAILURE_RING_SIZE, FailureTracker } from '../../../actors/scaler/failure-tracker.ts';
import { IsolationRuleError, buildIsolationRuleOps, removeIsolationRules } from '../../../src/scaler/nft.ts';

describe('buildIsolationRuleOps (SCL-12)', () => {
  const match = { sourceIp: '10.88.0.7', agentId: 'scaler-container-1a2b3c4d' };

  it('inserts accepts (gateway, allowlist) at the chain head and appends the private-range drops at the tail', () => {
    const ops = buildIsolationRuleOps(match, '10.88.0.1', { allowlist: ['203.0.113.0/24'], denyAll: false });
    assert.deepEqual(ops.map((op) => op.verb), ['insert', 'insert', 'add', 'add', 'add', 'add']);
    const text = ops.map((op) => op.tokens.join(' '));
    assert.equal(text[0], 'rule ip switchyard forward ip saddr 10.88.0.7 ip daddr 10.88.0.1 comment "switchyard:scaler-container-1a2b3c4d" accept');
    assert.match(text[1] ?? '', /ip daddr 203\.0\.113\.0\/24 .* accept$/);
    assert.deepEqual(
      text.slice(2).map((t) => /ip daddr (\S+)/.exec(t)?.[1]),
      ['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16', '169.254.0.0/16'],
    );
    assert.ok(text.slice(2).every((t) => t.startsWith('rule ip switchyard forward ip saddr 10.88.0.7 ') && t.endsWith(' drop')));
  });

  it('denyAll appends a final source-only drop after the private ranges', () => {
    const ops = buildIsolationRuleOps(match, '10.88.0.1', { allowlist: [], denyAll: true });
    const last = ops.at(-1);
    assert.equal(last?.verb, 'add');
    assert.equal(last?.tokens.join(' '), 'rule ip switchyard forward ip saddr 10.88.0.7 comment "switchyard:scaler-container-1a2b3c4d" drop');
    assert.equal(ops.filter((op) => op.verb === 'insert').length, 1, 'only the gateway is accepted');
  });

  it('refuses anything that is not an address: no rule text from untrusted input', () => {
    assert.throws(() => buildIsolationRuleOps({ ...match, sourceIp: '10.0.0.1; flush ruleset' }, '10.0.0.1', { allowlist: [], denyAll: false }), IsolationRuleError);
    assert.throws(() => buildIsolationRuleOps(match, '10.0.0.1', { allowlist: ['0.0.0.0/33'], denyAll: false }), IsolationRuleError);
    assert.throws(() => buildIsolationRuleOps({ ...match, agentId: 'a"b' }, '10.0.0.1', { allowlist: [], denyAll: false }), IsolationRuleError);
  });

  it('removal deletes exactly the rules carrying the agent comment, by handle', async () => {
    const calls: string[][] = [];
    const listing = [
      'table ip switchyard {',
      '  chain forward {',
      '    ip saddr 10.88.0.7 ip daddr 10.88.0.1 comment "switchyard:scaler-container-1a2b3c4d" accept # handle 4',
      '    ip saddr 10.88.0.8 ip daddr 10.88.0.1 comment "switchyard:scaler-container-ffffffff" accept # handle 5',
      '    ip saddr 10.88.0.7 ip daddr 10.0.0.0/8 comment "switchyard:scaler-container-1a2b3c4d" drop # handle 9',
    ].join('\n');
    const removed = await removeIsolationRules('scaler-container-1a2b3c4d', (args) => {
      calls.push(args);
      return Promise.resolve(args[0] === '-a' ? listing : '');
    });
    assert.equal(removed, 2);
    assert.deepEqual(calls.slice(1).map((c) => c.at(-1)), ['4', '9']);
  });
});

describe('FailureTracker (SCL-9)', () => {
  it('keeps the last 256 and summarises per backend over a window with an injected clock', () => {
    const tracker = new FailureTracker();
    for (let i = 0; i < 300; i++) tracker.record({ backendName: i % 2 ? 'docker' : 'local', backendType: i % 2 ? 'container' : 'bare-metal', bound: i % 3 === 0, detail: `e${i}`, timestampMs: i * 1000 });
    assert.equal(tracker.size, FAILURE_RING_SIZE);
    assert.equal(tracker.entries()[0]?.detail, 'e44', 'the oldest 44 were overwritten');
    const summary = tracker.recentByBackend(10_000, 299_000);
    assert.deepEqual(Object.keys(summary).sort(), ['docker', 'local']);
    assert.equal((summary['local']?.boundCount ?? 0) + (summary['local']?.unboundCount ?? 0), 5, 'local failures at 290..298 s');
    assert.equal(summary['docker']?.lastError, 'e299');
    assert.equal(summary['docker']?.lastAtMs, 299_000);
    assert.equal(summary['docker']?.backendType, 'container');
    assert.deepEqual(tracker.recentByBackend(10_000, 10_000_000), {}, 'nothing in a later window');
  });
});

describe('scaler definitions', () => {
  it('a bare-metal label set carries the host labels the agent reports; a container set no kici:host', () => {
    const [bare, docker] = compileScalerDefinitions(
      [
        { type: 'bare-metal', name: 'local', labels: ['linux'] },
        { type: 'container', name: 'docker', image: 'sy-agent:1', labelSets: [{ labels: ['gpu'], mandatoryLabels: ['gpu'], warmPool: { size: 1 } }], resources: { cpu: 1, memoryBytes: 512 } },
      ],
      'build-host',
    );
    assert.ok(bare?.labelSets[0]?.labels.includes('kici:host:build-host'));
    assert.ok(bare?.labelSets[0]?.labels.includes('linux'));
    assert.ok(docker?.labelSets[0]?.labels.includes('kici:os:linux'));
    assert.ok(!docker?.labelSets[0]?.labels.some((l) => l.startsWith('kici:host:')));
    assert.deepEqual(docker?.labelSets[0]?.resources, { cpu: 1, memoryBytes: 512 });
    assert.deepEqual(docker?.labelSets[0]?.warmPool, { size: 1, idleTimeoutSeconds: 300 });
    assert.equal(docker?.type === 'container' && docker.network, 'host');
  });

  it('refuses duplicate names and unknown fields', () => {
    assert.throws(() => compileScalerDefinitions([{ type: 'bare-metal', name: 'a' }, { type: 'bare-metal', name: 'a' }]), /unique/);
    assert.throws(() => compileScalerDefinitions([{ type: 'bare-metal', name: 'a', colour: 'red' }]));
  });

  it('passes only known host variables to agents, never the coordinator secrets', () => {
    const env = passedHostEnv({ PATH: '/bin', HOME: '/root', DATABASE_URL: 'postgres://x:secret@h/db', SWITCHYARD_ADMIN_TOKEN: 's' });
    assert.deepEqual(env, { PATH: '/bin', HOME: '/root' });
  });

  it('SCL-4: ownership marks; an unbound spawn carries no job or run', () => {
    const marks = { installationId: 'sy-1', scaler: 'local', agentId: 'scaler-bare-metal-00000001' };
    assert.deepEqual(ownershipLabels({ ...marks, spawnContext: { boundJobId: 'build', runId: 'r1' } }), {
      'switchyard.managed': 'true',
      'switchyard.owner': 'sy-1',
      'switchyard.agent-id': 'scaler-bare-metal-00000001',
      'switchyard.scaler': 'local',
      'switchyard.bound-job-id': 'build',
      'switchyard.run-id': 'r1',
    });
    assert.equal(ownershipEnv({ ...marks, spawnContext: null })['SWITCHYARD_RUN_ID'], undefined);
  });
});

describe('candidatesFor (SCL-2)', () => {
  const sets = [
    { labels: ['kici:os:linux', 'linux'], mandatoryLabels: [], properties: { 'switchyard.runSteps': true }, resources: null, warmPool: null },
    { labels: ['kici:os:linux', 'gpu'], mandatoryLabels: ['gpu'], properties: { 'switchyard.runSteps': true }, resources: null, warmPool: null },
  ];
  const req = (runsOn: string[], excludeLabels: string[] = []) => ({
    runsOn: runsOn.map((value) => ({ kind: 'exact' as const, value })),
    excludeLabels: excludeLabels.map((value) => ({ kind: 'exact' as const, value })),
    runsOnPick: 'deterministic' as const,
    executor: 'run-steps' as const,
  });

  it('a label set serves a job that requires its labels and every mandatory label; exclusions and regexes apply', () => {
    assert.deepEqual(candidatesFor(req(['kici:os:linux']), [{ name: 'b', labelSets: sets }]), [{ backend: 'b', labelSet: 0 }], 'the tainted set needs gpu required');
    assert.deepEqual(candidatesFor(req(['gpu']), [{ name: 'b', labelSets: sets }]), [{ backend: 'b', labelSet: 1 }]);
    assert.deepEqual(candidatesFor(req(['kici:os:linux'], ['linux']), [{ name: 'b', labelSets: sets }]), []);
    assert.deepEqual(candidatesFor(req(['windows']), [{ name: 'b', labelSets: sets }]), []);
    const regex = { ...req([]), runsOn: [{ kind: 'regex' as const, source: '^kici:os:', flags: '' }] };
    assert.deepEqual(candidatesFor(regex, [{ name: 'b', labelSets: sets }]), [{ backend: 'b', labelSet: 0 }]);
  });
});

describe('scaler settings (src/config)', () => {
  it('the embedded mode has one bare-metal backend by default; DATABASE_URL mode none; "none" turns it off', async () => {
    const { loadConfig, ConfigError } = await import('../../../src/config/index.ts');
    const embedded = loadConfig({ SWITCHYARD_SCALER_LABELS: 'linux, big' });
    assert.deepEqual(embedded.scaler.backends.map((b) => [b.type, b.name]), [['bare-metal', 'bare-metal']]);
    assert.ok(embedded.scaler.backends[0]?.labelSets[0]?.labels.includes('kici:os:linux'));
    assert.ok(embedded.scaler.backends[0]?.labelSets[0]?.labels.includes('big'));
    assert.equal(embedded.scaler.spawnTimeoutMs, 300_000);
    assert.equal(embedded.scaler.tokenTtlMs, 3_600_000);
    assert.deepEqual(loadConfig({ DATABASE_URL: 'postgres://x/y' }).scaler.backends, []);
    assert.deepEqual(loadConfig({ SWITCHYARD_SCALERS: 'none' }).scaler.backends, []);
    assert.throws(() => loadConfig({ SWITCHYARD_SCALERS: '[{"type":"container","name":"d"}]' }), (error: unknown) => error instanceof ConfigError && error.key === 'SWITCHYARD_SCALERS' && /image/.test(error.message));
    assert.throws(() => loadConfig({ SWITCHYARD_SCALERS: '[not json' }), ConfigError);
  });
});
