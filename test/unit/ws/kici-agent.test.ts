import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseAgentMessage, parseOrchestratorMessage } from '../../../src/ws/messages.ts';
import type { JobDispatch } from '../../../src/ws/messages.ts';
import { KiciFrames, stockLabels, type AgentIdentity } from '../../support/kici-agent-frames.ts';
import { JobRun, type JobChannel, type JobEnd } from '../../support/kici-agent-job.ts';
import { failAt, hold, initFailure, initSuccess, stepsOf, succeed, type RunnableScript } from '../../support/kici-agent-scripts.ts';
import { fieldSet, objectAt, wireRecords, type WireFrame } from '../../support/kici-wire-fixture.ts';

const records = wireRecords();
const identity: AgentIdentity = {
  ...{ agentId: 'lab-agent-1', url: 'ws://127.0.0.1:1/ws', token: 'kat_test', labels: ['lab'], roles: ['builder', 'init-runner'] },
  ...{ hostname: 'vm', platform: 'linux', arch: 'x64' },
};
const frames = new KiciFrames(identity);

/** Every field set the stock agent used, per type. */
const recordedFieldSets = new Map<string, Set<string>>();
for (const record of records.filter((r) => r.dir === 'A->O')) {
  const sets = recordedFieldSets.get(record.msg.type) ?? new Set<string>();
  sets.add(fieldSet(record.msg));
  recordedFieldSets.set(record.msg.type, sets);
}

function recordedDispatch(workflow: string, name: string): JobDispatch {
  for (const record of records) {
    const config = objectAt(record.msg, 'jobConfig');
    if (record.msg.type !== 'job.dispatch' || config?.['workflowName'] !== workflow || config['name'] !== name) continue;
    const parsed = parseOrchestratorMessage(JSON.stringify(record.msg));
    assert.ok(parsed.ok && parsed.message.type === 'job.dispatch');
    return parsed.message;
  }
  throw new Error(`no dispatch of ${workflow}/${name} in the recording`);
}

/** The order of a job's frames: type plus state, step index or event type. */
function signature(frame: Record<string, unknown>): string {
  const detail = [frame['stepIndex'], frame['state'], frame['eventType']].filter((part) => part !== undefined);
  return [frame['type'], ...detail].join(':');
}

/** What the stock agent sent for `jobId`, from its ack up to its `agent.status`. */
function recordedSequence(jobId: string): string[] {
  const start = records.findIndex((r) => r.dir === 'O->A' && r.msg['jobId'] === jobId);
  const after = records.slice(start + 1);
  const end = after.findIndex((r) => r.msg.type === 'agent.status');
  return after.slice(0, end).filter((r) => r.dir === 'A->O').map((r) => signature(r.msg));
}

async function play(dispatch: JobDispatch, script: RunnableScript, control?: (run: JobRun, sent: WireFrame[]) => Promise<void>) {
  const sent: WireFrame[] = [];
  let end: JobEnd | undefined;
  const channel: JobChannel = {
    direct: (frame) => sent.push(frame),
    buffered: (frame) => sent.push(frame),
    agentLog: (line) => sent.push(frames.agentLog([line])),
    ended: (_run, how) => (end = how),
  };
  const run = new JobRun(dispatch, script, frames, channel, { paceMs: 0, jobHeartbeatMs: 0 });
  const done = run.run();
  await control?.(run, sent);
  await done;
  return { sent, end };
}

async function until(condition: () => boolean): Promise<void> {
  while (!condition()) await new Promise((resolve) => setImmediate(resolve));
}

function assertStockShaped(sent: readonly WireFrame[], options: { initData?: boolean } = {}): void {
  for (const frame of sent) {
    const parsed = parseAgentMessage(JSON.stringify(frame));
    assert.ok(parsed.ok, `${frame.type}: ${parsed.ok ? '' : parsed.reason}`);
    const recorded = recordedFieldSets.get(frame.type);
    assert.ok(recorded, `${frame.type} is in the recording`);
    const terminalInit = options.initData && frame.type === 'job.status' && frame['state'] !== 'running';
    const shape = terminalInit ? Object.keys(frame).sort().join(',') : fieldSet(frame);
    const known = terminalInit ? [...recorded].map((set) => set.split(',').filter((k) => !k.startsWith('data.')).join(',')) : [...recorded];
    assert.ok(known.includes(shape), `${signature(frame)} has the recorded fields: ${shape}`);
  }
}

function withoutSourceTarball(dispatch: JobDispatch): JobDispatch {
  const { sourceTarUrl: _url, sourceTarHash: _hash, ...rest } = dispatch;
  return rest;
}

describe('the KiCI test agent answers with the recorded frames', () => {
  it('success with outputs: the frames, their order and their fields are the stock agent’s', async () => {
    const dispatch = recordedDispatch('needsctx', 'setup');
    const { sent, end } = await play(dispatch, succeed(dispatch, { outputs: { make: { version: '1.2.3' } } }));
    assert.equal(end, 'success');
    assert.deepEqual(sent.map(signature), recordedSequence(dispatch.jobId));
    assertStockShaped(sent);
    const terminal = sent.at(-2);
    assert.deepEqual(objectAt(terminal ?? {}, 'data')?.['outputs'], { make: { version: '1.2.3' } });
  });

  it('step log lines come after execution end, and logBytesStreamed counts them as recorded', async () => {
    const dispatch = recordedDispatch('needsctx', 'report');
    const line = 'needs.setup.status=success jobOutputs={"make":{"version":"1.2.3"}}';
    const { sent } = await play(dispatch, succeed(dispatch, { logs: { show: [line] } }));
    assert.deepEqual(sent.map(signature), recordedSequence(dispatch.jobId));
    const step = sent.find((f) => f.type === 'step.status' && f['state'] === 'success');
    assert.equal(step?.['logBytesStreamed'], 66, 'the recorded value for this line');
    assertStockShaped(sent);
  });

  it('a failing step: step.status failed with the stock error text, job.status failed with stepResults', async () => {
    const dispatch = recordedDispatch('needsfail', 'probe');
    const { sent, end } = await play(dispatch, failAt(dispatch, 'fail', { exitCode: 1 }));
    assert.equal(end, 'failed');
    assert.deepEqual(sent.map(signature), recordedSequence(dispatch.jobId));
    assertStockShaped(sent);
    const step = parseAgentMessage(JSON.stringify(sent.find((f) => f['state'] === 'failed' && f.type === 'step.status')));
    assert.ok(step.ok && step.message.type === 'step.status');
    assert.equal(step.message.data?.error?.exitCode, 1);
    assert.match(step.message.data?.error?.message ?? '', /^\n {4}at Object\.run \(file:\/\/.+\/\.kici\/workflows\/needsfail\.ts\?t=\d+:6:11\)\n {4}exit code: 1$/);
    const job = parseAgentMessage(JSON.stringify(sent.find((f) => f['state'] === 'failed' && f.type === 'job.status')));
    assert.ok(job.ok && job.message.type === 'job.status');
    assert.deepEqual(job.message.data?.stepResults?.map((r) => [r.name, r.status, r.error]), [['fail', 'failed', step.message.data?.error?.message]]);
  });

  it('later steps after a failure are left out by default, or reported skipped on request', async () => {
    const base = recordedDispatch('needsfail', 'probe');
    const steps = ['a', 'b', 'c'].map((name) => ({ name, hasOutputs: false }));
    const dispatch: JobDispatch = { ...base, jobConfig: { ...base.jobConfig, steps } };
    const omitted = await play(dispatch, failAt(dispatch, 'b'));
    assert.deepEqual(omitted.sent.filter((f) => f.type === 'step.status').map(signature), ['step.status:0:running', 'step.status:0:success', 'step.status:1:running', 'step.status:1:failed']);
    const skipped = await play(dispatch, failAt(dispatch, 'b', { laterSteps: 'skipped' }));
    assert.equal(signature(skipped.sent.filter((f) => f.type === 'step.status').at(-1) ?? {}), 'step.status:2:skipped');
    assertStockShaped(skipped.sent);
  });

  it('parallel groups are flattened in order', () => {
    const base = recordedDispatch('bench', 'one');
    const group = { kind: 'parallel' as const, name: 'p', failFast: true, children: [{ name: 'x', hasOutputs: false }, { name: 'y', hasOutputs: false }] };
    const dispatch: JobDispatch = { ...base, jobConfig: { ...base.jobConfig, steps: [{ name: 'first', hasOutputs: false }, group] } };
    assert.deepEqual(stepsOf(dispatch), [{ index: 0, name: 'first' }, { index: 1, name: 'x' }, { index: 2, name: 'y' }]);
  });
});

describe('the KiCI test agent runs init jobs (lockfile.md §7)', () => {
  const base = recordedDispatch('needsctx', 'setup');
  const initConfig = { initOnly: true, targetJobName: 'build', workflowName: 'needsctx', source: '.kici/workflows/needsctx.ts', dynamicMatrix: true, event: base.jobConfig.event, timeoutMs: 60_000 };
  const parsed = parseOrchestratorMessage(JSON.stringify({ ...withoutSourceTarball(base), jobConfig: initConfig }));
  assert.ok(parsed.ok && parsed.message.type === 'job.dispatch', 'an init dispatch with source as a string parses');
  const dispatch = parsed.message;
  const initSequence = [
    ...['job.ack', 'job.status:running', 'job.context', 'run.event:agent.clone.start', 'run.event:agent.clone.end', 'run.event:agent.execution.start'],
    ...['agent.log', 'log.chunk:-1', 'step.status:0:running', 'step.status:0:success', 'run.event:agent.execution.end', 'log.chunk:-1'],
    ...['job.status:success', 'run.event:agent.teardown'],
  ];

  it('success: one step init at index 0, then initComplete and initResult with matrix combinations', async () => {
    const initResult = { matrixValues: [{ os: 'linux' }, { os: 'mac' }], environmentNames: ['prod'], env: { A: '1' }, concurrencyGroup: 'g' };
    const { sent, end } = await play(dispatch, initSuccess(initResult));
    assert.equal(end, 'success');
    assert.deepEqual(sent.map(signature), initSequence);
    assertStockShaped(sent, { initData: true });
    const status = parseAgentMessage(JSON.stringify(sent.at(-2)));
    assert.ok(status.ok && status.message.type === 'job.status');
    assert.deepEqual(status.message.data, { initComplete: true, initResult });
  });

  it('failure: job.status failed with error and initFailed', async () => {
    const { sent, end } = await play(dispatch, initFailure('matrix function threw: boom'));
    assert.equal(end, 'failed');
    assertStockShaped(sent, { initData: true });
    const status = parseAgentMessage(JSON.stringify(sent.at(-2)));
    assert.ok(status.ok && status.message.type === 'job.status' && status.message.state === 'failed');
    assert.deepEqual(status.message.data, { error: 'matrix function threw: boom', initFailed: true });
    assert.deepEqual(sent.filter((f) => f.type === 'step.status').map(signature), ['step.status:0:running', 'step.status:0:failed']);
  });
});

describe('the KiCI test agent holds, finishes and cancels jobs', () => {
  const dispatch = recordedDispatch('bench', 'one');
  const opened = (sent: WireFrame[]) => sent.some((f) => f['eventType'] === 'agent.execution.start');

  it('hold: ack, running and execution start; finish() runs the given script to its end', async () => {
    const { sent, end } = await play(dispatch, hold(), async (run, sent) => {
      await until(() => run.state === 'held' && opened(sent));
      assert.ok(!sent.some((f) => f.type === 'step.status'), 'no step before finish()');
      assert.ok(run.finish(succeed(dispatch, { logs: { trivial: ['ok'] } })));
    });
    assert.equal(end, 'success');
    assert.deepEqual(sent.map(signature), recordedSequence(dispatch.jobId));
  });

  it('job.cancel while held: execution end cancelled, job.status cancelled, teardown', async () => {
    const { sent, end } = await play(dispatch, hold(), async (run, sent) => {
      await until(() => run.state === 'held' && opened(sent));
      run.cancel('user asked', false);
    });
    assert.equal(end, 'cancelled');
    assert.deepEqual(sent.slice(-3).map(signature), ['run.event:agent.execution.end', 'job.status:cancelled', 'run.event:agent.teardown']);
    assertStockShaped(sent);
  });
});

describe('the KiCI test agent’s own frames', () => {
  const recordedRegister = records.find((r) => r.msg.type === 'agent.register')?.msg ?? { type: '' };

  it('agent.register: the recorded labels and fields; inFlightJobs only when it runs jobs', () => {
    const register = frames.register([]);
    assert.deepEqual(register['labels'], recordedRegister['labels']);
    assert.deepEqual(stockLabels(identity), recordedRegister['labels']);
    assert.deepEqual(Object.keys(register), Object.keys(recordedRegister).filter((k) => k !== 'runningAsUid' || process.getuid !== undefined));
    assert.match(String(register['messageId']), /^register-lab-agent-1-\d+$/);
    const again = parseAgentMessage(JSON.stringify(frames.register([{ jobId: 'j', runId: 'r' }])));
    assert.ok(again.ok && again.message.type === 'agent.register');
    assert.deepEqual(again.message.inFlightJobs, [{ jobId: 'j', runId: 'r' }]);
    assert.equal(again.message.properties, undefined);
    assert.equal(again.message.maxConcurrency, undefined);
  });

  it('config.ack, the gap marker, heartbeat, agent.status and agent.metrics parse with the recorded fields', () => {
    const marker = frames.gapMarker(0, 0, 1);
    assert.deepEqual(marker['lines'], records[4]?.msg['lines']);
    const own = [frames.configAck(), marker, frames.heartbeat(), frames.agentStatus(0), frames.agentMetrics({ success: 2 }, 0), frames.register([])];
    assertStockShaped(own);
    assert.match(String(own[0]?.['messageId']), /^config-ack-lab-agent-1-\d+$/);
  });

  it('job.reject and job.heartbeat, absent from the recording, follow protocol.md §9.2', () => {
    const dispatch = recordedDispatch('bench', 'one');
    for (const frame of [frames.jobReject(dispatch, 'busy'), frames.jobHeartbeat(dispatch)]) {
      const parsed = parseAgentMessage(JSON.stringify(frame));
      assert.ok(parsed.ok, frame.type);
    }
  });
});
