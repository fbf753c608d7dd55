import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  AGENT_MESSAGE_SCHEMAS,
  CLOSE_CODES,
  ORCHESTRATOR_MESSAGE_SCHEMAS,
  dispatchSchema,
  dispatchSecretFieldsSchema,
  isStorageRequest,
  parseAgentMessage,
  parseOrchestratorMessage,
  refusalFor,
  truncateCloseReason,
} from '../../../src/ws/messages.ts';
import { AGENT_EXAMPLES, DISPATCH_EXAMPLE, ORCHESTRATOR_EXAMPLES } from './message-examples.ts';

const frame = (value: unknown): string => JSON.stringify(value);

function agentFailure(value: unknown): { reason: string; type?: string; unknownType?: boolean } {
  const result = parseAgentMessage(typeof value === 'string' ? value : frame(value));
  assert.equal(result.ok, false, 'expected a parse failure');
  return result.ok ? { reason: '' } : result;
}

describe('agent → orchestrator messages', () => {
  for (const [type, example] of Object.entries(AGENT_EXAMPLES)) {
    it(`parses a valid ${type}`, () => {
      const result = parseAgentMessage(frame(example));
      assert.ok(result.ok, result.ok ? '' : result.reason);
      assert.equal(result.message.type, type);
    });
  }

  it('has an example for every schema', () => {
    assert.deepEqual(Object.keys(AGENT_EXAMPLES).sort(), Object.keys(AGENT_MESSAGE_SCHEMAS).sort());
  });

  it('strips unknown fields instead of failing', () => {
    const result = parseAgentMessage(frame({ ...AGENT_EXAMPLES['job.ack'], extra: 1 }));
    assert.ok(result.ok);
    assert.equal('extra' in result.message, false);
  });

  it('reads step_type at the top level and inside data', () => {
    const base = AGENT_EXAMPLES['step.status'];
    const top = parseAgentMessage(frame({ ...base, step_type: 'hook:cleanup' }));
    const nested = parseAgentMessage(frame({ ...base, state: 'success', data: { step_type: 'hook:onFailure', durationMs: 3 } }));
    assert.ok(top.ok && top.message.type === 'step.status');
    assert.equal(top.message.step_type, 'hook:cleanup');
    assert.ok(nested.ok && nested.message.type === 'step.status');
    assert.equal(nested.message.step_type, 'hook:onFailure');
    assert.equal(nested.message.data?.step_type, 'hook:onFailure');
  });

  it('accepts a step error with exit code or signal', () => {
    const base = { ...AGENT_EXAMPLES['step.status'], state: 'failed' };
    assert.ok(parseAgentMessage(frame({ ...base, data: { error: { message: 'exit 2', exitCode: 2 } } })).ok);
    assert.ok(parseAgentMessage(frame({ ...base, data: { error: { message: 'killed', signal: 'SIGKILL' } } })).ok);
  });

  // Regression: the stock agent's failed build step says `data.error: "<message>"`; the frame was refused and the socket closed 4003.
  it('reads a step error sent as a plain message, as the stock agent sends it for build and init steps', () => {
    const parsed = parseAgentMessage(frame({ ...AGENT_EXAMPLES['step.status'], state: 'failed', data: { error: 'npm install failed' } }));
    assert.ok(parsed.ok && parsed.message.type === 'step.status');
    assert.deepEqual(parsed.message.data?.error, { message: 'npm install failed' });
  });

  it('reports bad JSON, non-objects and a missing type', () => {
    assert.match(agentFailure('{"type":').reason, /^invalid JSON/);
    assert.match(agentFailure('[1]').reason, /not a JSON object/);
    assert.match(agentFailure({ token: 'x' }).reason, /^type: expected a string/);
  });

  it('names the field of a schema failure', () => {
    const failure = agentFailure({ ...AGENT_EXAMPLES['job.status'], state: 'exploded' });
    assert.equal(failure.type, 'job.status');
    assert.equal(failure.unknownType, undefined);
    assert.match(failure.reason, /^job\.status: state: /);
    assert.match(agentFailure({ ...AGENT_EXAMPLES['step.status'], stepIndex: -1 }).reason, /stepIndex/);
    assert.match(agentFailure({ ...AGENT_EXAMPLES['auth.request'], token: '' }).reason, /token/);
    assert.match(agentFailure({ ...AGENT_EXAMPLES['job.reject'], reason: 'tired' }).reason, /reason/);
    assert.match(agentFailure({ type: 'agent.register', messageId: 'm', agentId: 'a' }).reason, /labels/);
    assert.match(agentFailure({ ...AGENT_EXAMPLES['run.event'], sourceService: 'o' }).reason, /sourceService/);
    assert.match(agentFailure({ type: 'event.emit' }).reason, /^event\.emit: jobId: /);
  });

  it('allows stepIndex -1 only on log.chunk', () => {
    assert.ok(parseAgentMessage(frame({ ...AGENT_EXAMPLES['log.chunk'], stepIndex: -1 })).ok);
    assert.match(agentFailure({ ...AGENT_EXAMPLES['log.chunk'], stepIndex: -2 }).reason, /stepIndex/);
  });

  it('flags an unknown type without calling it an error, and marks the ignored families', () => {
    const unknown = agentFailure({ type: 'agent.teleport', x: 1 });
    assert.equal(unknown.unknownType, true);
    assert.equal(unknown.type, 'agent.teleport');
    const complete = parseAgentMessage(frame({ type: 'cache.warmup.complete' }));
    assert.ok(!complete.ok && complete.unknownType === true && complete.ignored === true);
    const bundle = parseAgentMessage(frame({ type: 'fleet.bundle.fetch' }));
    assert.ok(!bundle.ok && bundle.ignored === true);
  });

  it('does not take inherited keys for types', () => {
    assert.equal(agentFailure({ type: 'constructor' }).unknownType, true);
    assert.equal(agentFailure({ type: '__proto__' }).unknownType, true);
  });
});

describe('orchestrator → agent messages', () => {
  for (const [type, example] of Object.entries(ORCHESTRATOR_EXAMPLES)) {
    it(`parses a valid ${type}`, () => {
      const result = parseOrchestratorMessage(frame(example));
      assert.ok(result.ok, result.ok ? '' : result.reason);
      assert.equal(result.message.type, type);
    });
  }

  it('has an example for every schema', () => {
    assert.deepEqual(Object.keys(ORCHESTRATOR_EXAMPLES).sort(), Object.keys(ORCHESTRATOR_MESSAGE_SCHEMAS).sort());
  });

  it('defaults register.ack scalerManaged to false', () => {
    const result = parseOrchestratorMessage(frame({ type: 'register.ack', agentId: 'a', labels: [] }));
    assert.ok(result.ok && result.message.type === 'register.ack');
    assert.equal(result.message.scalerManaged, false);
  });

  it('flags an unknown type', () => {
    const result = parseOrchestratorMessage(frame({ type: 'fleet.rebalance' }));
    assert.ok(!result.ok && result.unknownType === true && result.type === 'fleet.rebalance');
  });
});

describe('dispatchSchema', () => {
  const reasonFor = (patch: Record<string, unknown>): string => {
    const result = dispatchSchema.safeParse({ ...DISPATCH_EXAMPLE, ...patch });
    assert.equal(result.success, false, 'expected the dispatch to be refused');
    return result.error?.issues.map((issue) => `${issue.path.join('.')}: ${issue.message}`).join('; ') ?? '';
  };
  const withSteps = (steps: unknown[]) => ({ jobConfig: { ...DISPATCH_EXAMPLE.jobConfig, steps } });

  it('keeps unknown jobConfig keys so a validated dispatch can be sent as it is', () => {
    const parsed = dispatchSchema.parse({ ...DISPATCH_EXAMPLE, jobConfig: { ...DISPATCH_EXAMPLE.jobConfig, futureKey: 1 } });
    assert.equal(parsed.jobConfig.futureKey, 1);
    assert.deepEqual(parsed.jobConfig.container, { image: 'node:20' });
  });

  it('requires repoUrl, ref, sha, lockFileUrl and jobConfig', () => {
    for (const field of ['repoUrl', 'ref', 'sha', 'lockFileUrl', 'jobConfig', 'timestamp']) {
      assert.match(reasonFor({ [field]: undefined }), new RegExp(`^${field}: `));
    }
  });

  it('refuses a token that disagrees with sourceAuth', () => {
    assert.match(reasonFor({ token: 'other' }), /^token: must agree with sourceAuth/);
    assert.ok(dispatchSchema.safeParse({ ...DISPATCH_EXAMPLE, sourceAuth: undefined }).success);
  });

  it('refuses a pinned ssh policy without known hosts', () => {
    const sourceAuth = { kind: 'ssh', secret: 'key', sshHostKeyPolicy: 'pinned' };
    assert.match(reasonFor({ sourceAuth, token: undefined }), /sourceAuth\.sshKnownHostsPem/);
  });

  it('refuses secrets inside jobConfig', () => {
    assert.match(reasonFor({ jobConfig: { ...DISPATCH_EXAMPLE.jobConfig, secrets: {} } }), /jobConfig\.secrets/);
  });

  it('checks the run extension of steps', () => {
    assert.match(reasonFor(withSteps([{ name: 'a', hasOutputs: false, shell: 'bash' }])), /steps\.0\.shell: only valid next to run/);
    assert.match(reasonFor(withSteps([{ name: 'a', hasOutputs: false, run: 'x', shell: 'zsh' }])), /steps\.0\.shell/);
    assert.match(reasonFor(withSteps([{ name: 'a', hasOutputs: false, run: 'x', workingDirectory: '/etc' }])), /workingDirectory/);
    assert.match(reasonFor(withSteps([{ name: 'a', hasOutputs: false, run: 'x', workingDirectory: 'a/../..' }])), /workingDirectory/);
    assert.match(reasonFor(withSteps([{ name: 'a', hasOutputs: false, run: '' }])), /steps\.0\.run/);
  });

  it('names the field inside a parallel group', () => {
    const group = { kind: 'parallel', name: 'p', failFast: true, children: [{ name: 'c', hasOutputs: 'no' }] };
    assert.match(reasonFor(withSteps([group])), /steps\.0\.children\.0\.hasOutputs/);
  });
});

describe('dispatchSecretFieldsSchema', () => {
  const fields = {
    secrets: { TOKEN: 't' },
    namespacedSecrets: { prod: { TOKEN: 'p' } },
    runPublicKey: 'key',
    npmRegistries: [{ url: 'https://npm.example', alwaysAuth: false, token: 'n' }],
    installEnvSecrets: { NPM_TOKEN: 'n' },
  };

  it('checks what secret resolution adds, so a checked dispatch with them added is still a valid dispatch', () => {
    const added = dispatchSecretFieldsSchema.parse(fields);
    assert.ok(dispatchSchema.safeParse({ ...dispatchSchema.parse(DISPATCH_EXAMPLE), ...added }).success);
  });

  it('refuses a bad value and any field that is not one of them', () => {
    assert.equal(dispatchSecretFieldsSchema.safeParse({ secrets: { TOKEN: 1 } }).success, false);
    assert.equal(dispatchSecretFieldsSchema.safeParse({ npmRegistries: [{ url: 'u', alwaysAuth: false }] }).success, false);
    assert.equal(dispatchSecretFieldsSchema.safeParse({ token: 't' }).success, false, 'token takes part in the checks between fields');
  });
});

describe('close codes and refusals', () => {
  it('names every close code of §2', () => {
    assert.deepEqual(
      Object.values(CLOSE_CODES).sort((a, b) => a - b),
      [1000, 1001, 4002, 4003, 4004, 4005, 4006, 4010, 4030, 4031],
    );
  });

  it('truncates close reasons to 123 bytes without splitting a character', () => {
    assert.equal(truncateCloseReason('short'), 'short');
    const long = truncateCloseReason('é'.repeat(100));
    assert.ok(Buffer.byteLength(long) <= 123);
    assert.equal(long, 'é'.repeat(61));
  });

  it('a request that cannot be served gets the miss the stock agent reads, with its request id; a completion gets nothing', () => {
    const expected: Record<string, Record<string, unknown> | null> = {
      'cache.upload.request': { type: 'cache.upload.response', requestId: 'req-1', uploadUrl: '' },
      'provenance.upload.request': { type: 'provenance.upload.response', requestId: 'req-2', uploadUrl: '' },
      'cache.user.restore.request': { type: 'cache.user.restore.response', requestId: 'req-3', hit: false },
      'cache.user.save.request': { type: 'cache.user.save.response', requestId: 'req-4', skip: true },
      'event.emit': { type: 'event.emit.response', requestId: 'req-5', error: 'why' },
      'agent.api.request': { type: 'agent.api.response', requestId: 'req-6', error: 'why' },
      'cache.upload.complete': null,
      'cache.user.save.complete': null,
      'provenance.upload.complete': null,
    };
    for (const [type, answer] of Object.entries(expected)) {
      const parsed = parseAgentMessage(frame(AGENT_EXAMPLES[type as keyof typeof AGENT_EXAMPLES]));
      assert.ok(parsed.ok && isStorageRequest(parsed.message), type);
      const refusal = refusalFor(parsed.message, 'why');
      assert.deepEqual(refusal, answer);
      if (refusal) assert.ok(parseOrchestratorMessage(frame(refusal)).ok);
    }
  });
});
