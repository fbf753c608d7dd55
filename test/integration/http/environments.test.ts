import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { skipReason } from '../../support/database.ts';
import { CoordinatorClient, dropDatabase, runStepsWorkflow } from '../../support/fake-agent.ts';
import { ADMIN_TOKEN, after as processCleanups, sharedDatabaseUrl, startCoordinatorProcess, stopProcess } from '../../support/processes.ts';
import type { CoordinatorProcess } from '../../support/processes.ts';

interface Gate {
  gateId: string;
  jobKey: string | null;
  environment: string | null;
  kind: string;
  status: string;
  reason: string;
  expiresAt?: number;
  decidedBy?: string | null;
  comment?: string | null;
}
interface GatesView {
  run: { status: string };
  approvals: Gate[];
  pendingGates: Gate[];
  jobs: { job_key: string; status: string; outcome: string | null; waiting_reason: { kind: string; message: string } | null }[];
}

/** A workflow whose one job `deploy` names `environment` and needs an agent nobody has. */
function deployWorkflow(environment: string): object {
  const workflow = runStepsWorkflow(`deploy-${environment}`, `nobody-${randomUUID().slice(0, 8)}`, [{ name: 'deploy', steps: [['ship', 'true']] }]) as { jobs: object[] };
  return { ...workflow, jobs: workflow.jobs.map((job) => ({ ...job, environments: [{ value: environment, dynamic: false }] })) };
}

describe('environment and approval routes (docs/http-api.md#environments)', { skip: await skipReason('external') }, () => {
  let databaseUrl: string;
  let coordinator: CoordinatorProcess;
  let client: CoordinatorClient;

  before(async () => {
    databaseUrl = await sharedDatabaseUrl('external');
    coordinator = await startCoordinatorProcess({ DATABASE_URL: databaseUrl });
    client = new CoordinatorClient(coordinator.url, ADMIN_TOKEN);
  });
  after(async () => {
    await stopProcess(coordinator);
    await dropDatabase(databaseUrl);
    for (const fn of processCleanups.splice(0)) await fn();
  });

  const call = async (method: string, path: string, body?: unknown, headers: Record<string, string> = {}) => {
    const res = await coordinator.api(path, { method, headers, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
    return { status: res.status, body: (await res.json()) as Record<string, unknown> };
  };

  async function pendingGate(runId: string): Promise<Gate> {
    const view = await client.waitForRun(runId, (v) => (v as unknown as GatesView).pendingGates.length > 0, 20_000, 'a pending gate');
    return (view as unknown as GatesView).pendingGates[0] as Gate;
  }

  it('PUT creates (201) then replaces (200); GET shows it with variables, the list names the variables only', async () => {
    const settings = { repositories: ['acme/app'], branches: ['main', 'release/*'], minimumTrust: 'known', approvalRequired: true, approvers: 'ops team', holdExpirySeconds: 3600, variables: { REGION: 'eu-west-1' } };
    const created = await call('PUT', '/api/v1/environments/staging', settings);
    assert.equal(created.status, 201);
    assert.deepEqual([created.body['created'], created.body['variables'], created.body['allowLocalExecution']], [true, { REGION: 'eu-west-1' }, false]);
    const replaced = await call('PUT', '/api/v1/environments/staging', { ...settings, approvalRequired: false, allowLocalExecution: true, variables: undefined });
    assert.equal(replaced.status, 200);
    const shown = await call('GET', '/api/v1/environments/staging');
    assert.deepEqual(
      [shown.body['approvalRequired'], shown.body['allowLocalExecution'], shown.body['branches'], shown.body['repositories'], shown.body['variables'], shown.body['holdExpirySeconds']],
      [false, true, ['main', 'release/*'], ['acme/app'], { REGION: 'eu-west-1' }, 3600],
      'a PUT without variables keeps them',
    );
    const list = await call('GET', '/api/v1/environments');
    const listed = (list.body['environments'] as { name: string; variableKeys: string[]; variables?: unknown }[]).find((e) => e.name === 'staging');
    assert.deepEqual([listed?.variableKeys, listed?.variables], [['REGION'], undefined]);
  });

  it('variables are set and deleted one by one; unknown ones and environments are 404', async () => {
    await call('PUT', '/api/v1/environments/vars', {});
    assert.equal((await call('PUT', '/api/v1/environments/vars/variables/TOKEN_URL', { value: 'https://x' })).status, 200);
    assert.deepEqual((await call('GET', '/api/v1/environments/vars')).body['variables'], { TOKEN_URL: 'https://x' });
    assert.equal((await call('DELETE', '/api/v1/environments/vars/variables/TOKEN_URL')).status, 200);
    assert.equal((await call('DELETE', '/api/v1/environments/vars/variables/TOKEN_URL')).status, 404);
    assert.equal((await call('PUT', '/api/v1/environments/nowhere/variables/A', { value: '1' })).status, 404);
    assert.equal((await call('GET', '/api/v1/environments/nowhere')).status, 404);
    assert.equal((await call('DELETE', '/api/v1/environments/nowhere')).status, 404);
  });

  it('bad input is 400 with a reason, and nothing is stored half-way', async () => {
    const bad: [string, string, unknown, RegExp][] = [
      ['PUT', '/api/v1/environments/bad', { minimumTrust: 'admin' }, /minimumTrust/],
      ['PUT', '/api/v1/environments/bad', { branches: [''] }, /branches.0: must be a branch glob/],
      ['PUT', '/api/v1/environments/bad', { repositories: ['not-a-repo'] }, /repositories.0: must be owner\/name/],
      ['PUT', '/api/v1/environments/bad', { holdExpirySeconds: 5 }, /holdExpirySeconds/],
      ['PUT', '/api/v1/environments/bad', { variables: { KICI_AGENT_TOKEN: 'x' } }, /variable name/],
      ['PUT', '/api/v1/environments/bad', { variables: { OK: 'x'.repeat(40_000) } }, /at most 32768/],
      ['PUT', '/api/v1/environments/bad', { surprise: true }, /surprise|unrecognized/i],
      ['PUT', '/api/v1/environments/-bad', {}, /name:/],
      ['PUT', '/api/v1/environments/vars/variables/1A', { value: 'x' }, /key:/],
      ['PUT', '/api/v1/environments/vars/variables/A', { value: 3 }, /value/],
    ];
    for (const [method, path, body, reason] of bad) {
      const answer = await call(method, path, body);
      assert.equal(answer.status, 400, `${method} ${path} ${JSON.stringify(body).slice(0, 60)}`);
      assert.match(String(answer.body['reason']), reason);
    }
    assert.equal((await call('GET', '/api/v1/environments/bad')).status, 404, 'no half-stored environment');
  });

  it('DELETE answers 409 with the run ids while a held run references it; after the decision it deletes and the record keeps its history', async () => {
    await call('PUT', '/api/v1/environments/prod', { approvalRequired: true, variables: { A: '1' } });
    const runId = await client.createRun(deployWorkflow('prod'));
    const gate = await pendingGate(runId);
    assert.deepEqual([gate.environment, gate.jobKey, gate.kind, gate.status], ['prod', 'deploy', 'approval', 'pending']);
    assert.ok((gate.expiresAt ?? 0) > Date.now() + 23 * 3_600_000);
    const pendingJobs = await client.json<{ jobs: { run_id: string; waiting_reason: { message: string } }[] }>('/api/v1/jobs?status=pending');
    assert.match(pendingJobs.jobs.find((j) => j.run_id === runId)?.waiting_reason.message ?? '', /^waiting for approval of environment prod \(expires in 2[34] h\)$/);

    const refused = await call('DELETE', '/api/v1/environments/prod');
    assert.equal(refused.status, 409);
    assert.deepEqual([refused.body['error'], refused.body['runIds']], ['pending_held_runs', [runId]]);
    assert.equal((await call('GET', '/api/v1/environments/prod')).status, 200, 'nothing was deleted');

    const rejected = await call('POST', `/api/v1/runs/${runId}/approvals/${gate.gateId}`, { decision: 'reject', comment: 'freeze week' }, { 'x-switchyard-actor': 'bob' });
    assert.equal(rejected.status, 202);
    const view = (await client.waitForRunStatus(runId, 'cancelled')) as unknown as GatesView;
    assert.equal(view.jobs[0]?.outcome, 'approval of environment prod rejected by bob: freeze week');
    const decided = await client.waitForRun(runId, (v) => (v as unknown as GatesView).approvals[0]?.status === 'rejected', 10_000, 'the decision recorded');
    assert.deepEqual((decided as unknown as GatesView).pendingGates, []);

    assert.equal((await call('DELETE', '/api/v1/environments/prod')).status, 200);
    assert.equal((await call('GET', '/api/v1/environments/prod')).status, 404);
    const history = ((await client.run(runId)) as unknown as GatesView).approvals[0];
    assert.deepEqual([history?.status, history?.environment, history?.decidedBy, history?.comment], ['rejected', null, 'bob', 'freeze week']);
    const journal = await client.journal(runId);
    assert.ok(journal.some((e) => e.type === 'job.approval' && (e as unknown as { by: string }).by === 'bob'), 'who decided is journaled');
  });

  it('a workflow approval (RUN-4) is the gate `workflow` of a held run: listed as pending, approved over the same route', async () => {
    const workflow = { ...(deployWorkflow('none') as { jobs: { environments?: unknown }[] }), approval: { timeoutSeconds: 600 } };
    workflow.jobs = workflow.jobs.map(({ environments: _dropped, ...job }) => job);
    const runId = await client.createRun(workflow);
    const held = (await client.waitForRunStatus(runId, 'held')) as unknown as GatesView;
    assert.deepEqual(held.pendingGates.map((g) => [g.gateId, g.kind]), [['workflow', 'workflow']]);
    const approved = await call('POST', `/api/v1/runs/${runId}/approvals/workflow`, { decision: 'approve' });
    assert.equal(approved.status, 202);
    const released = (await client.waitForRun(runId, (v) => v.run.status === 'pending', 10_000, 'the run released')) as unknown as GatesView;
    assert.deepEqual(released.pendingGates, []);
    assert.equal((await client.journal(runId)).find((e) => e.type === 'run.approval')?.type, 'run.approval');
    await client.cancel(runId, { force: true });
  });

  it('approvals: bad body 400, unknown run or gate 404, a finished run or a decided gate 409', async () => {
    await call('PUT', '/api/v1/environments/gated', { approvalRequired: true });
    const runId = await client.createRun(deployWorkflow('gated'));
    const gate = await pendingGate(runId);
    const decide = (run: string, gateId: string, body: unknown) => call('POST', `/api/v1/runs/${run}/approvals/${gateId}`, body);
    assert.equal((await decide(runId, gate.gateId, { decision: 'maybe' })).status, 400);
    assert.equal((await decide(runId, gate.gateId, {})).status, 400);
    assert.equal((await decide(randomUUID(), gate.gateId, { decision: 'approve' })).status, 404);
    const unknown = await decide(runId, 'env-0000', { decision: 'approve' });
    assert.deepEqual([unknown.status, unknown.body['reason']], [404, `run ${runId} has no gate env-0000`]);
    assert.equal((await decide(runId, 'workflow', { decision: 'approve' })).status, 409, 'the run is not held for a workflow approval');
    const approved = await decide(runId, gate.gateId, { decision: 'approve', actor: 'carol' });
    assert.deepEqual([approved.status, approved.body['by']], [202, 'carol']);
    await client.waitForRun(runId, (v) => (v as unknown as GatesView).approvals[0]?.status === 'approved', 10_000, 'the approval recorded');
    const again = await decide(runId, gate.gateId, { decision: 'reject' });
    assert.deepEqual([again.status, again.body['reason']], [409, `gate ${gate.gateId} is already approved (by carol)`]);
    await client.cancel(runId, { force: true });
    await client.waitForRunStatus(runId, 'cancelled');
    const finished = await decide(runId, gate.gateId, { decision: 'approve' });
    assert.deepEqual([finished.status, finished.body['error']], [409, 'run finished']);
  });
});
