import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import type { JobDispatch } from '../../../src/ws/messages.ts';
import { skipReason } from '../../support/database.ts';
import { CoordinatorClient, dropDatabase, type JobView, type RunView } from '../../support/fake-agent.ts';
import { KiciTestAgent } from '../../support/kici-agent.ts';
import { failAt, hold, initFailure, initSuccess, succeed } from '../../support/kici-agent-scripts.ts';
import type { JobScript } from '../../support/kici-agent-scripts.ts';
import { ADMIN_TOKEN, after as processCleanups, sharedDatabaseUrl, startCoordinatorProcess, stopProcess } from '../../support/processes.ts';
import type { CoordinatorProcess } from '../../support/processes.ts';

const beside = resolve(dirname(fileURLToPath(import.meta.url)), '../../../../shared');
const LOCKFILES = join(existsSync(beside) ? beside : '/work/shared', 'fixtures/kici-lockfiles');

/** One workflow of a lock file compiled by `kici compile`, as the manual-run API takes it. */
function fixtureWorkflow(file: string, name: string): { name: string; jobs: object[] } {
  const lock = JSON.parse(readFileSync(join(LOCKFILES, file), 'utf8')) as { workflows: { name: string; jobs: object[] }[] };
  const workflow = lock.workflows.find((wf) => wf.name === name);
  assert.ok(workflow, `${file} has workflow ${name}`);
  return workflow;
}

function tsJob(name: string, steps: string[], fields: object = {}): object {
  return {
    _type: 'static',
    name,
    runsOn: [{ kind: 'exact', value: 'kici:os:linux' }],
    needs: [],
    steps: steps.map((step) => ({ name: step, hasOutputs: false })),
    ...fields,
  };
}

const ALWAYS = ['success', 'failed', 'cancelled', 'skipped', 'timed_out_stale', 'drift_dropped'];
const ENV = { SWITCHYARD_RECOVERY_WINDOW_MS: '60000', SWITCHYARD_SCALERS: 'none', SWITCHYARD_REPLAY_GRACE_MS: '2000' };

/** How the agent answers each job, by name; init jobs by their target. Unnamed jobs succeed. */
const scripts = new Map<string, (dispatch: JobDispatch) => JobScript>([
  ['greet', (d) => succeed(d, { logs: { 'say-hello': ['Hello, world!'] } })],
  ['d', (d) => failAt(d, 'boom', { message: 'boom went the step' })],
  ['probe', (d) => failAt(d, 'fail')],
  ['setup', (d) => succeed(d, { outputs: { make: { version: '1.2.3' } } })],
  ['held', () => hold()],
  ['__init__fanout__a', () => initSuccess({ matrixValues: [{ shard: '1' }, { shard: '2' }, { shard: '3' }] })],
  ['__init__dyn__deploy', () => initSuccess({ env: { DEPLOY_TARGET: 'prod' }, environmentNames: ['production'] })],
  ['__init__broken__deploy', () => initFailure('External API down')],
]);

function answer(dispatch: JobDispatch): JobScript {
  const config = dispatch.jobConfig;
  const name = config.initOnly === true ? `__init__${String(config.workflowName)}__${String(config.targetJobName)}` : String(config.name);
  return scripts.get(name)?.(dispatch) ?? succeed(dispatch);
}

describe('KiCI workflows end to end on a stock-protocol agent (real coordinator process)', { skip: await skipReason('external') }, () => {
  let databaseUrl: string;
  let coordinator: CoordinatorProcess;
  let client: CoordinatorClient;
  let token: string;
  let agent: KiciTestAgent;

  before(async () => {
    databaseUrl = await sharedDatabaseUrl('external');
    coordinator = await startCoordinatorProcess({ DATABASE_URL: databaseUrl, ...ENV });
    client = new CoordinatorClient(coordinator.url, ADMIN_TOKEN);
    token = (await client.createToken()).token;
    agent = new KiciTestAgent({ url: `${coordinator.url.replace('http', 'ws')}/ws`, token, labels: ['lab'], script: answer });
    await agent.start();
  });
  after(async () => {
    await agent.close();
    await stopProcess(coordinator);
    await dropDatabase(databaseUrl);
    for (const fn of processCleanups.splice(0)) await fn();
  });

  async function run(workflow: object): Promise<RunView> {
    const runId = await client.createRun(workflow);
    return client.waitForRun(runId, (v) => ['success', 'failed', 'cancelled'].includes(v.run.status), 60_000, 'a final run');
  }

  const job = (view: RunView, key: string): JobView => {
    const found = view.jobs.find((j) => j.job_key === key);
    assert.ok(found, `run has job ${key}: ${JSON.stringify(view.jobs)}`);
    return found;
  };
  const dispatchOf = (runId: string, name: string) =>
    agent.dispatches.find((d) => d.runId === runId && d.jobConfig.name === name) ?? assert.fail(`no dispatch of ${name}`);

  it('hello-world: the job succeeds, its step and duration are in the API, its log is read by step name', async () => {
    const view = await run(fixtureWorkflow('hello.lock.json', 'hello-world'));
    assert.equal(view.run.status, 'success', JSON.stringify(view.jobs));
    const greet = job(view, 'greet');
    const lockSteps = greet.steps.filter((s) => s.index >= 0); // the runner step (-1) is there when the agent cloned
    assert.deepEqual(lockSteps.map((s) => [s.index, s.name, s.status]), [[0, 'say-hello', 'success']]);
    assert.equal(typeof lockSteps[0]?.durationMs, 'number');
    assert.equal(typeof greet.duration_ms, 'number');
    const text = await fetch(`${coordinator.url}/api/v1/runs/${view.run.run_id}/logs?job=greet&step=say-hello`, {
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, accept: 'text/plain' },
    }).then((res) => res.text());
    assert.equal(text, '[greet › say-hello] Hello, world!\n');
  });

  it('a needs chain with a failing step: the failed step is the job’s reason, with its exit code', async () => {
    const view = await run(fixtureWorkflow('hello-fanout-chain.lock.json', 'chain'));
    assert.equal(view.run.status, 'failed');
    assert.equal(job(view, 'c').status, 'success');
    const d = job(view, 'd');
    assert.equal(d.status, 'failed');
    assert.deepEqual(d.steps.filter((s) => s.index >= 0).map((s) => [s.name, s.status, s.exitCode]), [
      ['second', 'success', null],
      ['boom', 'failed', 1],
    ]);
    assert.match(d.outcome ?? '', /^step boom failed \(exit code 1\): boom went the step/);
    assert.equal(view.run.failure_reason, 'Failed jobs: d');
  });

  it('needs carry statuses and outputs: a failed probe reads failed downstream, setup’s outputs reach report', async () => {
    const workflow = {
      name: 'needs',
      jobs: [
        tsJob('probe', ['fail']),
        tsJob('setup', ['make']),
        tsJob('report', ['show'], { needs: [{ name: 'probe', runOn: ALWAYS }, { name: 'setup', runOn: ['success'] }] }),
      ],
    };
    const view = await run(workflow);
    assert.equal(job(view, 'report').status, 'success');
    assert.deepEqual(job(view, 'setup').outputs, { make: { version: '1.2.3' } });
    const report = dispatchOf(view.run.run_id, 'report');
    assert.deepEqual(report.upstreamJobStatuses, { probe: 'failed', setup: 'success' });
    assert.deepEqual(report.upstreamJobOutputs, { setup: { make: { version: '1.2.3' } } });
  });

  it('a static matrix: every child runs with its values and place in the fan-out', async () => {
    const workflow = { name: 'matrix', jobs: [tsJob('test', ['unit'], { matrix: { _type: 'static', values: { node: ['20', '22'] } } })] };
    const view = await run(workflow);
    assert.equal(view.run.status, 'success');
    const child = dispatchOf(view.run.run_id, 'test (22)');
    assert.deepEqual([child.jobConfig.matrixValues, child.jobConfig.fanoutIndex, child.jobConfig.fanoutTotal], [{ node: '22' }, 1, 2]);
  });

  it('a dynamic matrix followed by needs: the init job fans it out and the downstream runs after every child', async () => {
    const view = await run(fixtureWorkflow('hello-fanout-chain.lock.json', 'fanout'));
    assert.equal(view.run.status, 'success', JSON.stringify(view.jobs));
    assert.deepEqual(view.jobs.map((j) => [j.job_key, j.status]), [
      ['__init__fanout__a', 'success'],
      ['a (1)', 'success'],
      ['a (2)', 'success'],
      ['a (3)', 'success'],
      ['b', 'success'],
    ]);
    const init = agent.dispatches.find((d) => d.runId === view.run.run_id && d.jobConfig.initOnly === true);
    assert.ok(init);
    assert.equal(init.jobConfig.targetJobName, 'a');
    assert.equal(init.jobConfig.dynamicMatrix, true);
    assert.deepEqual(dispatchOf(view.run.run_id, 'b').upstreamJobStatuses, { 'a (1)': 'success', 'a (2)': 'success', 'a (3)': 'success', a: 'success' });
    const replay = await client.json<{ exact: boolean }>(`/api/v1/runs/${view.run.run_id}/replay`);
    assert.equal(replay.exact, true, 'the journal with the init job and the fan-out replays to the stored snapshot');
  });

  it('dynamic env and environment from an init job reach the dispatch; a failed init job fails its target with dynamic_eval', async () => {
    const target = tsJob('deploy', ['ship'], { dynamicEnv: true, environments: [{ value: '', dynamic: true }] });
    // The init job names `production`: it must exist when the run is created, and its variables go with the dispatch (ENV-4).
    await client.json('/api/v1/environments/production', { method: 'PUT', body: JSON.stringify({ variables: { CLUSTER: 'prod-1' } }) }, 201);
    const ok = await run({ name: 'dyn', jobs: [target] });
    assert.equal(ok.run.status, 'success');
    const deploy = dispatchOf(ok.run.run_id, 'deploy');
    assert.deepEqual([deploy.jobConfig.jobEnv, deploy.jobConfig.environment, deploy.jobConfig.environmentVars], [{ DEPLOY_TARGET: 'prod' }, 'production', { CLUSTER: 'prod-1' }]);

    const broken = await run({ name: 'broken', jobs: [target, tsJob('notify', ['send'], { needs: ['deploy'] })] });
    assert.equal(broken.run.status, 'failed');
    assert.equal(job(broken, 'deploy').init_failure?.category, 'dynamic_eval');
    assert.match(job(broken, 'deploy').outcome ?? '', /init job __init__broken__deploy ended failed: External API down/);
    assert.equal(job(broken, 'notify').status, 'skipped');
  });

  it('the agent never lost its connection: informational frames without optional fields were accepted', () => {
    assert.deepEqual(agent.closes, []);
    assert.equal(agent.received.filter((m) => m.type === 'register.ack').length, 1);
    assert.ok(agent.sent.some((frame) => frame.type === 'job.context'), 'job.context frames were sent');
  });

  it('an agent back without its running job (restarted) has the job failed once the replay grace passes, not after the recovery window', async () => {
    const runId = await client.createRun({ name: 'restart', jobs: [tsJob('held', ['wait'])] });
    await client.waitForJob(runId, 'held', (j) => j.status === 'running', 20_000, 'running');
    await agent.close({ abrupt: true });
    agent = new KiciTestAgent({ url: `${coordinator.url.replace('http', 'ws')}/ws`, token, labels: ['lab'], agentId: agent.agentId, script: answer });
    const restarted = Date.now();
    await agent.start();
    const view = await client.waitForRunStatus(runId, 'failed', 20_000);
    assert.equal(job(view, 'held').outcome, `agent ${agent.agentId} reconnected after losing its connection and did not report job held`);
    assert.ok(Date.now() - restarted < 30_000, 'settled well before the 60 s recovery window');
  });
});
