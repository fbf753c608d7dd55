import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { INFORMATIONAL_AGENT_TYPES, parseAgentMessage, parseOrchestratorMessage, RUN_EVENT_TYPES } from '../../../src/ws/messages.ts';
import type { AgentMessage, AgentMessageOf, AgentMessageType } from '../../../src/ws/messages.ts';
import { wireRecords, type WireRecord } from '../../support/kici-wire-fixture.ts';

/** Types the stock agent sends that protocol v1 ignores by rule (§9.5), and nothing else: every frame it sent is understood. */
const IGNORED_AGENT_TYPES: string[] = [];

const records = wireRecords();
const agentRecords = records.filter((r) => r.dir === 'A->O');
const orchestratorRecords = records.filter((r) => r.dir === 'O->A');

function parsedAgent(record: WireRecord): AgentMessage {
  const result = parseAgentMessage(JSON.stringify(record.msg));
  assert.ok(result.ok, `A->O ${record.msg.type} at t=${record.t}: ${result.ok ? '' : result.reason}`);
  return result.message;
}

function agentMessages<T extends AgentMessageType>(type: T): AgentMessageOf<T>[] {
  return agentRecords.filter((r) => r.msg.type === type).map((r) => parsedAgent(r) as AgentMessageOf<T>);
}

function jobMessages<T extends 'job.status' | 'step.status'>(type: T, jobId: string): AgentMessageOf<T>[] {
  return agentMessages(type).filter((m) => m.jobId === jobId);
}

/** The jobId of the first dispatch of job `name` in workflow `workflow`. */
function dispatchedJobId(workflow: string, name: string): string {
  const found = orchestratorRecords.find((r) => {
    const config = r.msg['jobConfig'];
    return r.msg.type === 'job.dispatch' && typeof config === 'object' && config !== null && 'name' in config && config.name === name && 'workflowName' in config && config.workflowName === workflow;
  });
  const jobId = found?.msg['jobId'];
  assert.equal(typeof jobId, 'string', `the fixture dispatches ${workflow}/${name}`);
  return String(jobId);
}

describe('the recorded stock agent 0.1.24 session replayed through our parser', () => {
  it('holds the 758 frames it is documented to hold', () => {
    assert.equal(records.length, 758);
  });

  it('every agent → orchestrator frame parses, except the types ignored by rule', () => {
    const ignored = new Set<string>();
    for (const record of agentRecords) {
      const result = parseAgentMessage(JSON.stringify(record.msg));
      if (result.ok) {
        assert.equal(result.message.type, record.msg.type);
        continue;
      }
      assert.ok(result.unknownType && result.ignored, `A->O ${record.msg.type} at t=${record.t} fails: ${result.reason}`);
      ignored.add(record.msg.type);
    }
    assert.deepEqual([...ignored].sort(), IGNORED_AGENT_TYPES);
  });

  it('every orchestrator → agent frame of the reference orchestrator parses (none is excused)', () => {
    const failures = orchestratorRecords
      .map((record) => ({ record, result: parseOrchestratorMessage(JSON.stringify(record.msg)) }))
      .filter(({ result }) => !result.ok)
      .map(({ record, result }) => `${record.msg.type} at t=${record.t}: ${result.ok ? '' : result.reason}`);
    assert.deepEqual(failures, []);
  });

  it('contains every informational type', () => {
    const seen = new Set(agentRecords.map((r) => r.msg.type).filter((type) => INFORMATIONAL_AGENT_TYPES.has(type)));
    assert.deepEqual([...seen].sort(), [...INFORMATIONAL_AGENT_TYPES].sort());
  });

  it('agent.register: version 0.1.24, both role labels, and no properties, maxConcurrency or inFlightJobs', () => {
    const registers = agentMessages('agent.register');
    assert.equal(registers.length, 2);
    for (const register of registers) {
      assert.equal(register.version, '0.1.24');
      assert.ok(register.labels.includes('kici:role:builder') && register.labels.includes('kici:role:init-runner'));
      assert.deepEqual(register.labels.filter((l) => l.startsWith('kici:arch:')), ['kici:arch:x64', 'kici:arch:amd64']);
      assert.match(register.messageId, new RegExp(`^register-${register.agentId}-\\d+$`));
      for (const absent of ['properties', 'maxConcurrency', 'inFlightJobs'] as const) assert.equal(register[absent], undefined, absent);
    }
  });

  it('job.context: no context.labels on the wire, and the agent token among the variables', () => {
    const contexts = agentMessages('job.context');
    assert.equal(contexts.length, 46);
    for (const context of contexts) {
      assert.equal(context.context.labels, undefined);
      assert.ok(context.context.envVars.some((v) => v.name === 'KICI_AGENT_TOKEN'), 'protocol.md §15: the token travels in clear');
    }
  });

  it('run.event: only the known event types; durationMs is null on start and teardown events', () => {
    const events = agentMessages('run.event');
    assert.ok(events.every((e) => (RUN_EVENT_TYPES as readonly string[]).includes(e.eventType)));
    for (const event of events.filter((e) => e.eventType.endsWith('.start') || e.eventType === 'agent.teardown')) assert.equal(event.durationMs, null);
    const ends = events.filter((e) => e.eventType === 'agent.execution.end');
    assert.deepEqual([...new Set(ends.map((e) => e.metadata?.['status']))].sort(), ['failed', 'success']);
  });

  it('terminal step.status: durationMs and error stay in data; no step_type is invented', () => {
    const steps = agentMessages('step.status');
    assert.ok(steps.every((s) => s.step_type === undefined && s.data?.step_type === undefined));
    const failed = steps.filter((s) => s.state === 'failed');
    assert.equal(failed.length, 2);
    for (const step of failed) {
      assert.equal(step.data?.error?.exitCode, 1);
      assert.match(step.data?.error?.message ?? '', /\n {4}at Object\.run \(file:\/\/.+\.kici\/workflows\/needsfail\.ts\?t=\d+:7:11\)\n {4}exit code: 1$/);
      assert.deepEqual(step.secretsAccessed, []);
    }
    const build = steps.filter((s) => s.stepName === 'build' && s.state === 'success');
    assert.ok(build.length > 0 && build.every((s) => s.data === undefined && typeof s.logBytesStreamed === 'number'));
  });

  it('step_type is read at the top level on running and inside data on a terminal state', () => {
    const record = agentRecords.find((r) => r.msg.type === 'step.status' && r.msg['state'] === 'success' && r.msg['data'] !== undefined);
    assert.ok(record);
    const terminal = { ...record.msg, data: { ...(record.msg['data'] as object), step_type: 'hook:cleanup' } };
    const parsed = parseAgentMessage(JSON.stringify(terminal));
    assert.ok(parsed.ok && parsed.message.type === 'step.status');
    assert.equal(parsed.message.step_type, 'hook:cleanup');
    const running = parseAgentMessage(JSON.stringify({ ...record.msg, state: 'running', data: undefined, step_type: 'hook:onFailure' }));
    assert.ok(running.ok && running.message.type === 'step.status');
    assert.equal(running.message.step_type, 'hook:onFailure');
  });

  it('job.status: terminal data carries stepResults, the needsctx outputs and the failed step error', () => {
    const setup = jobMessages('job.status', dispatchedJobId('needsctx', 'setup'));
    assert.deepEqual(setup.map((s) => s.state), ['running', 'success']);
    assert.deepEqual(setup[1]?.data?.outputs, { make: { version: '1.2.3' } });
    assert.deepEqual(setup[1]?.data?.stepResults?.map((r) => [r.name, r.status]), [['make', 'success']]);

    const probe = jobMessages('job.status', dispatchedJobId('needsfail', 'probe'));
    const failed = probe.find((s) => s.state === 'failed');
    assert.equal(failed?.data?.stepResults?.[0]?.status, 'failed');
    assert.match(failed?.data?.stepResults?.[0]?.error ?? '', /exit code: 1$/);
    const failedStep = jobMessages('step.status', dispatchedJobId('needsfail', 'probe')).find((s) => s.state === 'failed');
    assert.equal(failedStep?.data?.error?.exitCode, 1);

    const terminal = agentMessages('job.status').filter((s) => s.state !== 'running' && s.data?.stepResults !== undefined);
    assert.equal(terminal.length, 43);
    assert.ok(terminal.every((s) => typeof s.data?.durationMs === 'number'));
  });

  it('job.dispatch: the build-only dispatches name no export, and upstream outputs arrive whole', () => {
    const dispatches = orchestratorRecords.map((r) => parseOrchestratorMessage(JSON.stringify(r.msg))).flatMap((r) => (r.ok && r.message.type === 'job.dispatch' ? [r.message] : []));
    assert.equal(dispatches.length, 46);
    const buildOnly = dispatches.filter((d) => d.jobConfig.buildOnly === true);
    assert.equal(buildOnly.length, 3);
    assert.ok(buildOnly.every((d) => typeof d.jobConfig.source === 'object' && d.jobConfig.source.export === undefined));
    const report = dispatches.find((d) => d.upstreamJobOutputs !== undefined);
    assert.deepEqual(report?.upstreamJobOutputs, { setup: { make: { version: '1.2.3' } } });
  });
});

describe('informational frames fail softly', () => {
  const broken = (record: WireRecord | undefined, patch: Record<string, unknown>) => {
    assert.ok(record);
    return parseAgentMessage(JSON.stringify({ ...record.msg, ...patch }));
  };
  const first = (type: string) => agentRecords.find((r) => r.msg.type === type);

  it('a recorded informational frame with a broken field is flagged informational', () => {
    const patches: Record<string, Record<string, unknown>> = {
      'job.context': { context: 'not an object' },
      'agent.log': { lines: 'one line' },
      'agent.metrics': { metrics: [{ type: 'gauge' }] },
      'agent.status': { activeJobs: -1 },
      'run.event': { timestampMs: 'now' },
      'config.ack': { agentId: '' },
    };
    for (const [type, patch] of Object.entries(patches)) {
      const result = broken(first(type), patch);
      assert.ok(!result.ok && result.informational === true && result.type === type, `${type} is flagged`);
    }
  });

  it('a broken frame that settles or reports on a job, or a handshake frame, is not', () => {
    for (const [type, patch] of [
      ['job.status', { state: undefined }],
      ['job.ack', { messageId: undefined }],
      ['step.status', { stepIndex: -1 }],
      ['log.chunk', { lines: undefined }],
      ['agent.register', { labels: 'lab' }],
      ['heartbeat', { timestamp: 'now' }],
    ] as const) {
      const result = broken(first(type), patch);
      assert.ok(!result.ok && result.informational === undefined && result.unknownType === undefined, `${type} stays strict`);
    }
  });

  it('a future run.event type and null jobId/durationMs are accepted', () => {
    const result = broken(first('run.event'), { eventType: 'agent.cache.restore', jobId: null, durationMs: null });
    assert.ok(result.ok && result.message.type === 'run.event');
    assert.equal(result.message.eventType, 'agent.cache.restore');
    assert.equal(result.message.jobId, null);
  });

  it('job.context with an empty context parses; metric label values that are numbers become strings', () => {
    const context = broken(first('job.context'), { context: {} });
    assert.ok(context.ok && context.message.type === 'job.context');
    assert.deepEqual(context.message.context.envVars, []);
    const metrics = broken(first('agent.metrics'), { metrics: [{ name: 'http.requests', type: 'counter', value: 1, labels: { code: 200, ok: true } }] });
    assert.ok(metrics.ok && metrics.message.type === 'agent.metrics');
    assert.deepEqual(metrics.message.metrics[0]?.labels, { code: '200', ok: 'true' });
  });

  it('optional fields of the strict frames are optional: a bare job.status and step.status parse', () => {
    const status = { type: 'job.status', messageId: 'm', runId: 'r', jobId: 'j', state: 'success', timestamp: 1 };
    assert.ok(parseAgentMessage(JSON.stringify(status)).ok);
    const step = { type: 'step.status', messageId: 'm', runId: 'r', jobId: 'j', stepIndex: 0, stepName: 's', state: 'failed', timestamp: 1, data: { error: { message: 'x' } } };
    assert.ok(parseAgentMessage(JSON.stringify(step)).ok);
  });
});
