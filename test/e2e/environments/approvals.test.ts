import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { skipReason } from '../../support/database.ts';
import { CoordinatorClient, dropDatabase, FakeAgent, runStepsWorkflow } from '../../support/fake-agent.ts';
import type { JobDispatchFrame, RunView } from '../../support/fake-agent.ts';
import { ADMIN_TOKEN, after as processCleanups, sharedDatabaseUrl, startCoordinatorProcess, stopProcess } from '../../support/processes.ts';
import type { CoordinatorProcess } from '../../support/processes.ts';

type GateView = RunView & { pendingGates: { gateId: string; environment: string | null; expiresAt: number }[] };

/**
 * Environments end to end (docs/http-api.md#approvals): a real coordinator process, Postgres and a
 * protocol agent over WebSocket. A held job waits with its reason, an approval over HTTP sends it to
 * the agent with the environment's variables as they were when the run was created.
 */
describe('environments and approvals, end to end', { skip: await skipReason('external') }, () => {
  const label = `env-${randomUUID().slice(0, 8)}`;
  const dispatches: JobDispatchFrame[] = [];
  let databaseUrl: string;
  let coordinator: CoordinatorProcess;
  let client: CoordinatorClient;
  let agent: FakeAgent;

  before(async () => {
    databaseUrl = await sharedDatabaseUrl('external');
    coordinator = await startCoordinatorProcess({ DATABASE_URL: databaseUrl });
    client = new CoordinatorClient(coordinator.url, ADMIN_TOKEN);
    const { token } = await client.createToken();
    agent = await FakeAgent.connect(client.wsUrl, token, {
      labels: [label],
      onDispatch: (dispatch, self) => {
        dispatches.push(dispatch);
        self.runAtOnce(dispatch);
      },
    });
  });
  after(async () => {
    await agent.close();
    await stopProcess(coordinator);
    await dropDatabase(databaseUrl);
    for (const fn of processCleanups.splice(0)) await fn();
  });

  const put = (path: string, body: unknown, expected = 200) => client.json(path, { method: 'PUT', body: JSON.stringify(body) }, expected);

  /** `deploy` names `environment`; `build` names none. */
  function workflow(name: string, environment: string): object {
    const base = runStepsWorkflow(name, label, [{ name: 'build', steps: [['compile', 'true']] }, { name: 'deploy', needs: ['build'], steps: [['ship', 'true']] }]) as { jobs: { name: string }[] };
    return { ...base, jobs: base.jobs.map((job) => (job.name === 'deploy' ? { ...job, environments: [{ value: environment, dynamic: false }] } : job)) };
  }

  const dispatchOf = (runId: string, jobKey: string) => dispatches.find((d) => d.runId === runId && d.jobConfig['name'] === jobKey);

  it('approval required: the job waits with its reason, the approval sends it with the variables frozen at creation; the run succeeds', async () => {
    await put('/api/v1/environments/prod', { approvalRequired: true, branches: ['main', 'release/*'], variables: { REGION: 'eu-west-1', TIER: 'gold' } }, 201);
    const runId = await client.createRun(workflow('ship-it', 'prod'), { ref: 'refs/heads/main' });
    const held = (await client.waitForRun(runId, (v) => (v as GateView).pendingGates.length > 0, 20_000, 'a pending gate')) as GateView;
    const deploy = held.jobs.find((j) => j.job_key === 'deploy');
    assert.equal(deploy?.status, 'pending');
    assert.match(deploy?.waiting_reason?.message ?? '', /^waiting for approval of environment prod \(expires in 2[34] h\)$/);
    assert.equal(dispatchOf(runId, 'deploy'), undefined, 'nothing is sent while the job is held');
    assert.ok(dispatchOf(runId, 'build'), 'a job naming no environment is not held');

    // Edited after the run was created: the run keeps what it froze (ENV-4).
    await put('/api/v1/environments/prod/variables/REGION', { value: 'us-east-1' });
    await put('/api/v1/environments/prod', { approvalRequired: false, branches: ['nothing-matches'] });

    const gate = held.pendingGates[0];
    assert.ok(gate);
    await client.json(`/api/v1/runs/${runId}/approvals/${gate.gateId}`, { method: 'POST', body: JSON.stringify({ decision: 'approve', actor: 'alice' }) }, 202);
    await client.waitForRunStatus(runId, 'success');
    const sent = dispatchOf(runId, 'deploy');
    assert.equal(sent?.jobConfig['environment'], 'prod');
    assert.deepEqual(sent?.jobConfig['environmentVars'], { REGION: 'eu-west-1', TIER: 'gold' });
    assert.deepEqual(dispatchOf(runId, 'build')?.jobConfig['environmentVars'], {});
    const approval = (await client.journal(runId)).find((e) => e.type === 'job.approval') as unknown as { by: string; decision: string };
    assert.deepEqual([approval.by, approval.decision], ['alice', 'approve']);
  });

  it('a branch outside the globs fails the job with environment_rules naming the branch and globs; an unknown environment too', async () => {
    await put('/api/v1/environments/qa', { branches: ['main'], variables: { A: '1' } }, 201);
    const runId = await client.createRun(workflow('wrong-branch', 'qa'), { ref: 'refs/heads/feature/x' });
    const view = await client.waitForRunStatus(runId, 'failed');
    const deploy = view.jobs.find((j) => j.job_key === 'deploy');
    assert.equal(deploy?.init_failure?.category, 'environment_rules');
    assert.equal(deploy?.init_failure?.message, 'job deploy: branch feature/x does not match the branches of environment qa (main)');
    assert.equal(dispatchOf(runId, 'deploy'), undefined);

    const unknown = await client.waitForRunStatus(await client.createRun(workflow('unknown-env', 'nowhere')), 'failed');
    assert.equal(unknown.jobs.find((j) => j.job_key === 'deploy')?.init_failure?.message, 'job deploy: environment nowhere does not exist');
  });

  it('an environment with no hold dispatches at once with its variables; a rerun dispatches the same frozen values', async () => {
    await put('/api/v1/environments/open', { variables: { URL: 'https://open.example' } }, 201);
    const runId = await client.createRun(workflow('open', 'open'));
    await client.waitForRunStatus(runId, 'success');
    assert.deepEqual(dispatchOf(runId, 'deploy')?.jobConfig['environmentVars'], { URL: 'https://open.example' });
    await put('/api/v1/environments/open/variables/URL', { value: 'https://changed.example' });
    const { runId: rerun } = await client.json<{ runId: string }>(`/api/v1/runs/${runId}/rerun`, { method: 'POST', body: '{}' }, 201);
    await client.waitForRunStatus(rerun, 'success');
    assert.deepEqual(dispatchOf(rerun, 'deploy')?.jobConfig['environmentVars'], { URL: 'https://open.example' });
  });
});
