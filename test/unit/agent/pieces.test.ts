import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { reconnectDelayMs } from '../../../src/reference-agent/backoff.ts';
import { contextEnvVars, stepBaseEnv, stepEnv } from '../../../src/reference-agent/environment.ts';
import { LineSplitter, LogStream } from '../../../src/reference-agent/log-stream.ts';
import { dispatchSecretValues, SecretMasker } from '../../../src/reference-agent/masking.ts';
import { AgentOptionsError, compileAgentOptions } from '../../../src/reference-agent/options.ts';
import { autoLabels } from '../../../lib/self-reported-labels.ts';
import { planSteps } from '../../../src/reference-agent/plan.ts';
import { shellArgv } from '../../../src/reference-agent/shell.ts';
import { retryDelayMs } from '../../../src/reference-agent/step-runner.ts';
import { dispatchSchema, type JobDispatch } from '../../../src/ws/messages.ts';

const dispatch = (patch: Partial<JobDispatch> = {}): JobDispatch =>
  dispatchSchema.parse({
    type: 'job.dispatch',
    messageId: 'm',
    runId: 'r',
    jobId: 'j',
    repoUrl: 'file:///x',
    ref: 'main',
    sha: 'a'.repeat(40),
    lockFileUrl: '',
    timestamp: 1,
    jobConfig: {},
    ...patch,
  });

describe('reconnect backoff', () => {
  it('grows by 1.5 per attempt with up to 50 % jitter, capped at 60 s', () => {
    assert.equal(reconnectDelayMs(0, 1000, 60_000, () => 0), 1000);
    assert.equal(reconnectDelayMs(0, 1000, 60_000, () => 1), 1500);
    assert.equal(reconnectDelayMs(2, 1000, 60_000, () => 0), 2250);
    assert.equal(reconnectDelayMs(20, 1000, 60_000, () => 0.5), 60_000);
  });
});

describe('secret masking', () => {
  it('masks values of length 4 or more, longest first, and each line of a multi-line secret', () => {
    const masker = new SecretMasker(['abc', 'pass', 'password1', 'line-one\nline-two']);
    assert.equal(masker.mask('abc pass password1'), 'abc *** ***');
    assert.equal(masker.mask('got line-two here'), 'got *** here');
  });

  it('collects secrets, namespaced secrets and credentials from a dispatch', () => {
    const values = dispatchSecretValues(
      dispatch({
        secrets: { A: 'one1' },
        namespacedSecrets: { ns: { B: 'two2' } },
        sourceAuth: { kind: 'basic', secret: 'tok3' },
        token: 'tok3',
      }),
    );
    assert.deepEqual(values.sort(), ['one1', 'tok3', 'tok3', 'two2']);
  });
});

describe('log batching', () => {
  it('sends 50 lines per chunk and flushes the rest on close', () => {
    const batches: string[][] = [];
    const stream = new LogStream({ batchLines: 50, batchMs: 10_000, maxBytes: 1e6 }, new SecretMasker([]), (l) => batches.push(l));
    for (let i = 0; i < 120; i += 1) stream.push(`l${i}`);
    assert.deepEqual(batches.map((b) => b.length), [50, 50]);
    stream.close();
    assert.deepEqual(batches.map((b) => b.length), [50, 50, 20]);
  });

  it('flushes a partial batch after batchMs', async () => {
    const batches: string[][] = [];
    const stream = new LogStream({ batchLines: 50, batchMs: 20, maxBytes: 1e6 }, new SecretMasker([]), (l) => batches.push(l));
    stream.push('only');
    assert.equal(batches.length, 0);
    await new Promise((resolve) => setTimeout(resolve, 60));
    assert.deepEqual(batches, [['only']]);
  });

  it('stops after maxBytes with one marker line', () => {
    const batches: string[][] = [];
    const stream = new LogStream({ batchLines: 50, batchMs: 10_000, maxBytes: 10 }, new SecretMasker([]), (l) => batches.push(l));
    for (const line of ['12345', '67890', 'more', 'more']) stream.push(line);
    stream.close();
    assert.deepEqual(batches, [['12345', '[log truncated: more than 10 bytes]']]);
  });

  it('splits lines across chunks, drops \\r and keeps a split UTF-8 character whole', () => {
    const lines: string[] = [];
    const splitter = new LineSplitter((l) => lines.push(l));
    const euro = Buffer.from('€');
    splitter.write(Buffer.concat([Buffer.from('a\r\nb'), euro.subarray(0, 1)]));
    splitter.write(Buffer.concat([euro.subarray(1), Buffer.from('\nlast')]));
    splitter.end();
    assert.deepEqual(lines, ['a', 'b€', 'last']);
  });
});

describe('step environment', () => {
  it('drops KICI_* and SWITCHYARD_* and layers environmentVars, jobEnv and step env', () => {
    const base = stepBaseEnv({ PATH: '/bin', KICI_AGENT_TOKEN: 'x', SWITCHYARD_AGENT_TOKEN: 'y', KEEP: 'base' });
    assert.deepEqual(base, { PATH: '/bin', KEEP: 'base' });
    const d = dispatch({ jobConfig: { environmentVars: { A: 'env', B: 'env' }, jobEnv: { B: 'job', C: 'job' } } });
    const env = stepEnv(base, d, { name: 's', hasOutputs: false, run: 'x', env: { C: 'step' } });
    assert.deepEqual(env, { PATH: '/bin', KEEP: 'base', A: 'env', B: 'job', C: 'step' });
  });

  it('redacts sensitive names, agent tokens and secret values in job.context', () => {
    const d = dispatch({ secrets: { S: 'value-secret' }, jobConfig: { jobEnv: { URL: 'x?value-secret' } } });
    const vars = contextEnvVars({ API_KEY: 'k', OTHER: `kat_${'f'.repeat(64)}` }, d, new SecretMasker(dispatchSecretValues(d)));
    assert.deepEqual(vars, [
      { name: 'API_KEY', value: '***', category: 'agent' },
      { name: 'OTHER', value: '***', category: 'agent' },
      { name: 'URL', value: 'x?***', category: 'job' },
    ]);
  });
});

describe('shell, plan and options', () => {
  it('runs bash with pipefail, sh without it, and falls back to sh without bash', () => {
    assert.deepEqual(shellArgv('echo', undefined, '/usr/bin:/bin'), ['bash', '-e', '-o', 'pipefail', '-c', 'echo']);
    assert.deepEqual(shellArgv('echo', 'sh', '/bin'), ['sh', '-e', '-c', 'echo']);
    assert.deepEqual(shellArgv('echo', '/bin/bash', ''), ['/bin/bash', '-e', '-o', 'pipefail', '-c', 'echo']);
    assert.deepEqual(shellArgv('echo', undefined, '/nonexistent'), ['sh', '-e', '-c', 'echo']);
  });

  it('numbers steps in the flattened order of the wire', () => {
    const child = (name: string) => ({ name, hasOutputs: false, run: 'x' });
    const plan = planSteps([child('a'), { kind: 'parallel', name: 'p', failFast: false, children: [child('b'), child('c')] }, child('d')]);
    const indices = plan.map((item) => (item.kind === 'single' ? item.step.index : item.children.map((c) => c.index)));
    assert.deepEqual(indices, [0, [1, 2], 3]);
  });

  it('computes retry delays', () => {
    assert.equal(retryDelayMs({ maxAttempts: 3, delayMs: 100, backoff: 'fixed' }, 3), 100);
    assert.equal(retryDelayMs({ maxAttempts: 5, delayMs: 100, backoff: 'exponential', maxDelayMs: 300 }, 2), 200);
    assert.equal(retryDelayMs({ maxAttempts: 5, delayMs: 100, backoff: 'exponential', maxDelayMs: 300 }, 4), 300);
  });

  it('adds os, arch and host labels and refuses the reserved kici: prefix', () => {
    assert.deepEqual(autoLabels('box', 'linux', 'x64'), ['kici:os:linux', 'kici:arch:x64', 'kici:arch:amd64', 'kici:host:box']);
    assert.deepEqual(autoLabels('m', 'darwin', 'arm64'), ['kici:os:macos', 'kici:os:darwin', 'kici:arch:arm64', 'kici:host:m']);
    const compiled = compileAgentOptions({ url: 'ws://h/ws', labels: ['a'] });
    assert.equal(compiled.maxConcurrency, 1);
    assert.equal(compiled.jobHeartbeatMs, 60_000);
    assert.equal(compiled.sentLabels[0], 'a');
    assert.throws(() => compileAgentOptions({ url: 'ws://h', labels: ['kici:role:builder'] }), AgentOptionsError);
    assert.throws(() => compileAgentOptions({ url: 'http://h' }), /url: must be a ws/);
    assert.throws(() => compileAgentOptions({ url: 'ws://h, http://other' }), /url: must be a ws/);
    assert.deepEqual(compileAgentOptions({ url: 'ws://a/ws/agent, ws://b/ws/agent' }).url, ['ws://a/ws/agent', 'ws://b/ws/agent']);
  });
});
