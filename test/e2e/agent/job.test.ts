import assert from 'node:assert/strict';
import { after, afterEach, beforeEach, describe, it } from 'node:test';
import type { AgentMessage, JobStatusMessage, StepStatusMessage } from '../../../src/ws/messages.ts';
import { cleanup, createRepo, dispatchFor, listDir, startAgent, step, type TestRepo } from './fixtures.ts';
import { ScriptedOrchestrator, type PeerConnection } from './scripted-orchestrator.ts';

function steps(messages: AgentMessage[]): string[] {
  return messages
    .filter((m): m is StepStatusMessage => m.type === 'step.status')
    .map((m) => `${m.stepIndex}:${m.state}`);
}

function logLines(messages: AgentMessage[], stepIndex: number): string[] {
  return messages.flatMap((m) => (m.type === 'log.chunk' && m.stepIndex === stepIndex ? m.lines : []));
}

async function terminal(peer: PeerConnection, jobId: string): Promise<JobStatusMessage> {
  return peer.next('job.status', (m) => m.jobId === jobId && m.state !== 'running', 30_000);
}

describe('reference agent: running jobs', () => {
  let orchestrator: ScriptedOrchestrator;
  let repo: TestRepo;

  beforeEach(async () => {
    repo = await createRepo({ 'hello.txt': 'hello from the repo\n', 'sub/dir/marker': 'x' });
  });
  afterEach(async () => {
    await cleanup();
    await orchestrator.close();
  });
  after(cleanup);

  async function registeredAgent(options: Parameters<typeof startAgent>[1] = {}, env?: NodeJS.ProcessEnv) {
    orchestrator = await ScriptedOrchestrator.start();
    const started = await startAgent(orchestrator.url, options, env);
    const peer = await orchestrator.connection(0);
    const register = await peer.handshake();
    return { ...started, peer, register };
  }

  it('registers with run-step support and its concurrency, then heartbeats', async () => {
    const { peer, register } = await registeredAgent({ maxConcurrency: 3, heartbeatMs: 50 });
    assert.deepEqual(register.properties, { 'switchyard.runSteps': true });
    assert.equal(register.maxConcurrency, 3);
    assert.ok(register.labels.includes('linux') && register.labels.includes('test'));
    assert.ok(register.labels.some((l) => l.startsWith('kici:os:')));
    assert.deepEqual(register.inFlightJobs, []);
    await peer.next('config.ack');
    await peer.next('heartbeat');
    assert.ok(peer.types().indexOf('heartbeat') > peer.types().indexOf('agent.register'));
  });

  it('clones a real repository and runs two steps with logs, statuses and heartbeats in order', async () => {
    const env = { ...process.env, KICI_AGENT_TOKEN: 'leak', SWITCHYARD_DB: 'leak', AGENT_VAR: 'base' };
    const { peer, workDir } = await registeredAgent({ jobHeartbeatMs: 100 }, env);
    const dispatch = dispatchFor(repo, [
      step('show', 'cat hello.txt; echo "kici=${KICI_AGENT_TOKEN:-unset} sy=${SWITCHYARD_DB:-unset}"; echo to-stderr >&2'),
      step('env', 'pwd; echo "$AGENT_VAR $STAGE $LAYER $ONLY_STEP"; sleep 0.3', {
        workingDirectory: 'sub/dir',
        env: { LAYER: 'step', ONLY_STEP: 'yes' },
      }),
    ], { jobConfig: { environmentVars: { STAGE: 'dev', LAYER: 'environment' }, jobEnv: { LAYER: 'job' } } });
    peer.send(dispatch);
    const status = await terminal(peer, dispatch.jobId);
    const messages = peer.forJob(dispatch.jobId);
    const kinds = messages.map((m) => (m.type === 'job.status' ? `job.status:${m.state}` : m.type));
    assert.deepEqual(kinds.slice(0, 2), ['job.ack', 'job.status:running']);
    assert.equal(kinds.at(-1), 'job.status:success');
    assert.deepEqual(steps(messages), ['0:running', '0:success', '1:running', '1:success']);
    assert.deepEqual(logLines(messages, 0), ['hello from the repo', 'kici=unset sy=unset', 'to-stderr']);
    const stepTwo = logLines(messages, 1);
    assert.match(stepTwo[0] ?? '', /\/src\/sub\/dir$/);
    assert.equal(stepTwo[1], 'base dev step yes');
    const firstLog = messages.findIndex((m) => m.type === 'log.chunk' && m.stepIndex === 1);
    const stepOneDone = messages.findIndex((m) => m.type === 'step.status' && m.stepIndex === 0 && m.state === 'success');
    assert.ok(stepOneDone < firstLog, 'step 1 logs come after step 0 ended');
    assert.ok(messages.some((m) => m.type === 'job.heartbeat'), 'job.heartbeat while running');
    assert.equal(status.data?.stepResults?.length, 2);
    assert.ok((status.data?.durationMs ?? -1) >= 0);
    assert.deepEqual(
      messages.filter((m) => m.type === 'run.event').map((m) => (m.type === 'run.event' ? m.eventType : '')),
      ['agent.clone.start', 'agent.clone.end', 'agent.execution.start', 'agent.execution.end', 'agent.teardown'],
    );
    assert.deepEqual(await listDir(workDir), [], 'workspace removed after the job');
    await peer.next('agent.status', (m) => m.activeJobs === 0);
  });

  it('fails on a non-zero exit code and skips the rest; continueOnError lets the job go on', async () => {
    const { peer } = await registeredAgent();
    const failing = dispatchFor(repo, [step('bad', 'echo before; exit 3'), step('never', 'echo never')]);
    peer.send(failing);
    const failed = await terminal(peer, failing.jobId);
    assert.equal(failed.state, 'failed');
    assert.match(failed.data?.error ?? '', /bad failed: exit code 3/);
    const stepFailed = peer.forJob(failing.jobId).find((m) => m.type === 'step.status' && m.state === 'failed');
    assert.ok(stepFailed?.type === 'step.status');
    assert.deepEqual(stepFailed.data?.error, { message: 'exit code 3', exitCode: 3 });
    assert.deepEqual(steps(peer.forJob(failing.jobId)), ['0:running', '0:failed', '1:skipped']);

    const tolerant = dispatchFor(repo, [step('bad', 'false', { continueOnError: true }), step('next', 'echo ran')]);
    peer.send(tolerant);
    const passed = await terminal(peer, tolerant.jobId);
    assert.equal(passed.state, 'success');
    assert.deepEqual(steps(peer.forJob(tolerant.jobId)), ['0:running', '0:failed', '1:running', '1:success']);
    assert.deepEqual(logLines(peer.forJob(tolerant.jobId), 1), ['ran']);
  });

  it('uses pipefail under bash and plain sh when asked', async () => {
    const { peer } = await registeredAgent();
    const dispatch = dispatchFor(repo, [
      step('pipe', 'false | true', { continueOnError: true }),
      step('sh', 'echo "$0"', { shell: 'sh' }),
    ]);
    peer.send(dispatch);
    await terminal(peer, dispatch.jobId);
    assert.deepEqual(steps(peer.forJob(dispatch.jobId)), ['0:running', '0:failed', '1:running', '1:success']);
    assert.deepEqual(logLines(peer.forJob(dispatch.jobId), 1), ['sh']);
  });

  it('fails a step without run, a step timeout and a job timeout with their reasons', async () => {
    const { peer } = await registeredAgent();
    const noRun = dispatchFor(undefined, [step('ts-step', undefined)]);
    peer.send(noRun);
    const noRunStatus = await terminal(peer, noRun.jobId);
    assert.equal(noRunStatus.state, 'failed');
    assert.match(noRunStatus.data?.error ?? '', /this agent executes only run steps/);

    const slowStep = dispatchFor(undefined, [step('slow', 'sleep 30', { timeout: 300 })]);
    peer.send(slowStep);
    const slowStatus = await terminal(peer, slowStep.jobId);
    assert.equal(slowStatus.state, 'failed');
    assert.match(slowStatus.data?.error ?? '', /step timeout/);

    const slowJob = dispatchFor(undefined, [step('slow', 'sleep 30')], { jobConfig: { timeout: 400, checkout: false } });
    peer.send(slowJob);
    const jobStatus = await terminal(peer, slowJob.jobId);
    assert.equal(jobStatus.state, 'failed');
    assert.equal(jobStatus.data?.error, 'job_timeout');
  });

  it('fails the job when HEAD does not match the dispatched sha', async () => {
    const { peer } = await registeredAgent();
    const dispatch = dispatchFor({ ...repo, sha: 'f'.repeat(40) }, [step('never', 'echo never')]);
    peer.send(dispatch);
    const status = await terminal(peer, dispatch.jobId);
    assert.equal(status.state, 'failed');
    assert.match(status.data?.error ?? '', /checkout failed: .*does not match the dispatched sha/);
    assert.deepEqual(steps(peer.forJob(dispatch.jobId)), ['0:skipped']);
  });

  it('masks every secret of length 4 or more in logs and keeps secrets out of job.context', async () => {
    const env = { ...process.env, DEPLOY_TOKEN: 'env-token-value', PLAIN: `has ${'kat_' + 'ab'.repeat(32)}` };
    const { peer } = await registeredAgent({}, env);
    const dispatch = dispatchFor(repo, [step('leak', 'echo "a=s3cr3t-value b=hunter22 c=abc"; echo "multi line-two"')], {
      secrets: { API: 's3cr3t-value', SHORT: 'abc' },
      namespacedSecrets: { prod: { DB: 'hunter22' } },
      installEnvSecrets: { M: 'multi\nline-two' },
      jobConfig: { jobEnv: { VISIBLE: 'hunter22-in-env' } },
    });
    peer.send(dispatch);
    await terminal(peer, dispatch.jobId);
    assert.deepEqual(logLines(peer.forJob(dispatch.jobId), 0), ['a=*** b=*** c=abc', '*** ***']);
    const context = await peer.next('job.context', (m) => m.jobId === dispatch.jobId);
    const value = (name: string) => (context.context.envVars ?? []).find((v) => v.name === name)?.value;
    assert.equal(value('DEPLOY_TOKEN'), '***');
    assert.equal(value('PLAIN'), 'has ***');
    assert.equal(value('VISIBLE'), '***-in-env');
    const sent = JSON.stringify(peer.received.filter((m) => m.type !== 'auth.request'));
    for (const secret of ['s3cr3t-value', 'hunter22', 'env-token-value', 'kat_']) assert.ok(!sent.includes(secret), secret);
  });

  it('runs parallel children within maxParallel, and fail-fast cancels the rest', async () => {
    const { peer } = await registeredAgent();
    const group = {
      kind: 'parallel' as const,
      name: 'group',
      failFast: true,
      maxParallel: 2,
      children: [step('a', 'sleep 30'), step('b', 'sleep 0.2; exit 1'), step('c', 'echo c')],
    };
    const dispatch = dispatchFor(undefined, [group, step('after', 'echo after')]);
    peer.send(dispatch);
    const status = await terminal(peer, dispatch.jobId);
    assert.equal(status.state, 'failed');
    const final = new Map(steps(peer.forJob(dispatch.jobId)).map((s) => s.split(':') as [string, string]));
    assert.deepEqual(Object.fromEntries(final), { 0: 'cancelled', 1: 'failed', 2: 'cancelled', 3: 'skipped' });
    assert.ok(steps(peer.forJob(dispatch.jobId)).includes('2:pending'));
  });

  it('retries a failing step up to maxAttempts', async () => {
    const { peer } = await registeredAgent();
    const dispatch = dispatchFor(undefined, [
      step('flaky', 'n=$(cat count 2>/dev/null || echo 0); echo $((n+1)) > count; [ "$n" -ge 2 ]', {
        retry: { maxAttempts: 3, delayMs: 10, backoff: 'fixed' },
      }),
    ]);
    peer.send(dispatch);
    const status = await terminal(peer, dispatch.jobId);
    assert.equal(status.state, 'success');
    assert.equal(logLines(peer.forJob(dispatch.jobId), 0).filter((l) => l.includes('retrying')).length, 2);
  });
});
