import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, afterEach, before, describe, it } from 'node:test';
import { skipReason } from '../../support/database.ts';
import { CoordinatorClient, dropDatabase, FakeAgent, runStepsWorkflow, type JobDispatchFrame, type RunView } from '../../support/fake-agent.ts';
import { ADMIN_TOKEN, after as processCleanups, sharedDatabaseUrl, startCoordinatorProcess, stopProcess } from '../../support/processes.ts';
import type { CoordinatorProcess } from '../../support/processes.ts';

type RerunView = RunView & { rerunOf: string | null; originalRunId: string | null; run: { workflow_name: string; repository: string } };

describe('POST /api/v1/runs/:id/rerun', { skip: await skipReason('external') }, () => {
  let databaseUrl: string;
  let coordinator: CoordinatorProcess;
  let client: CoordinatorClient;
  let token: string;
  const agents: FakeAgent[] = [];

  before(async () => {
    databaseUrl = await sharedDatabaseUrl('external');
    coordinator = await startCoordinatorProcess({ DATABASE_URL: databaseUrl });
    client = new CoordinatorClient(coordinator.url, ADMIN_TOKEN);
    token = (await client.createToken()).token;
  });
  afterEach(async () => {
    for (const agent of agents.splice(0)) await agent.close();
  });
  after(async () => {
    await stopProcess(coordinator);
    await dropDatabase(databaseUrl);
    for (const fn of processCleanups.splice(0)) await fn();
  });

  const rerun = (runId: string, body?: unknown) =>
    coordinator.api(`/api/v1/runs/${runId}/rerun`, { method: 'POST', ...(body === undefined ? {} : { body: JSON.stringify(body) }) });

  /** A run whose jobs wait for an agent nobody has: it stays running until cancelled. */
  async function waitingRun(): Promise<string> {
    const workflow = runStepsWorkflow('waits', `nobody-${randomUUID().slice(0, 8)}`, [{ name: 'build', steps: [['one', 'true']] }, { name: 'test', needs: ['build'], steps: [['two', 'true']] }]);
    return client.createRun(workflow, { ref: 'refs/heads/feature', sha: 'abc123' });
  }

  it('an ended run is run again from its frozen input under a new id that names the original', async () => {
    const original = await waitingRun();
    await client.cancel(original, { force: true });
    await client.waitForRunStatus(original, 'cancelled');
    const response = await rerun(original);
    assert.equal(response.status, 201);
    const answer = (await response.json()) as { runId: string; rerunOf: string; originalRunId: string; jobs: string[] };
    assert.notEqual(answer.runId, original);
    assert.deepEqual([answer.rerunOf, answer.originalRunId, answer.jobs], [original, original, ['build', 'test']]);
    const again = await client.json<RerunView>(`/api/v1/runs/${answer.runId}`);
    const before = await client.json<RerunView>(`/api/v1/runs/${original}`);
    assert.deepEqual([again.rerunOf, again.originalRunId], [original, original]);
    assert.equal(before.rerunOf, null);
    assert.deepEqual([again.run.workflow_name, again.run.repository], [before.run.workflow_name, before.run.repository]);
    assert.deepEqual(again.jobs.map((job) => job.job_key), ['build', 'test']);
    assert.ok(!['success', 'failed', 'cancelled'].includes(again.run.status), 'the rerun starts afresh');
  });

  it('a rerun dispatches from the same source (repository, ref, sha) and finishes on its own', async () => {
    const label = `rerun-${randomUUID().slice(0, 8)}`;
    const dispatches: JobDispatchFrame[] = [];
    const onDispatch = (dispatch: JobDispatchFrame, agent: FakeAgent) => {
      dispatches.push(dispatch);
      agent.runAtOnce(dispatch);
    };
    agents.push(await FakeAgent.connect(client.wsUrl, token, { labels: [label], onDispatch }));
    const first = await client.createRun(runStepsWorkflow('quick', label, [{ name: 'only', steps: [['s', 'true']] }]), { ref: 'refs/tags/v1', sha: 'feedbeef' });
    await client.waitForRunStatus(first, 'success');
    const { runId } = (await (await rerun(first, {})).json()) as { runId: string };
    await client.waitForRunStatus(runId, 'success');
    assert.deepEqual(dispatches.map((d) => [d.runId === first ? 'first' : d.runId === runId ? 'rerun' : d.runId, d.ref, d.sha]), [
      ['first', 'refs/tags/v1', 'feedbeef'],
      ['rerun', 'refs/tags/v1', 'feedbeef'],
    ]);
  });

  it('a run still running is 409 with the reason; an unknown run is 404', async () => {
    const running = await waitingRun();
    const busy = await rerun(running);
    assert.equal(busy.status, 409);
    const reason = (await busy.json()) as { error: string; reason: string };
    assert.equal(reason.error, 'run not finished');
    assert.match(reason.reason, new RegExp(`^run ${running} is still \\w+; wait for it to end or cancel it, then rerun$`));
    const unknown = await rerun('no-such-run');
    assert.equal(unknown.status, 404);
    assert.deepEqual(await unknown.json(), { error: 'not found', reason: 'no run no-such-run' });
    await client.cancel(running, { force: true });
  });

  it('a malformed body is 400 and creates no run', async () => {
    const ended = await waitingRun();
    await client.cancel(ended, { force: true });
    await client.waitForRunStatus(ended, 'cancelled');
    const runCount = async () => (await client.json<{ runs: unknown[] }>('/api/v1/runs?limit=1000')).runs.length;
    const before = await runCount();
    for (const body of [{ failedOnly: 'yes' }, { onlyFailed: true }, [1]]) {
      const response = await rerun(ended, body);
      assert.equal(response.status, 400, JSON.stringify(body));
      assert.equal(((await response.json()) as { error: string }).error, 'invalid request');
    }
    const malformed = await coordinator.api(`/api/v1/runs/${ended}/rerun`, { method: 'POST', body: '{' });
    assert.equal(malformed.status, 400);
    assert.equal(await runCount(), before, 'a refused rerun creates no run');
  });

  it('failedOnly runs the failed job and its dependants again; the jobs that succeeded are carried over with their outputs', async () => {
    const label = `failed-only-${randomUUID().slice(0, 8)}`;
    const dispatched: [string, string, Record<string, string> | undefined][] = [];
    let first = '';
    const onDispatch = (dispatch: JobDispatchFrame, agent: FakeAgent) => {
      const name = dispatch.jobConfig.name ?? '?';
      dispatched.push([dispatch.runId === first ? 'first' : 'rerun', name, dispatch.upstreamJobStatuses]);
      if (dispatch.runId !== first || name !== 'test') return agent.runAtOnce(dispatch);
      agent.ack(dispatch);
      agent.status(dispatch, 'running');
      agent.status(dispatch, 'failed', { error: 'exit 1' });
    };
    agents.push(await FakeAgent.connect(client.wsUrl, token, { labels: [label], onDispatch }));
    const workflow = runStepsWorkflow('chain', label, [
      { name: 'build', steps: [['b', 'true']] },
      { name: 'lint', steps: [['l', 'true']] },
      { name: 'test', needs: ['build'], steps: [['t', 'true']] },
      { name: 'deploy', needs: ['test'], steps: [['d', 'true']] },
    ]);
    first = await client.createRun(workflow, { sha: 'c0ffee' });
    const failed = await client.waitForRunStatus(first, 'failed');
    assert.deepEqual(Object.fromEntries(failed.jobs.map((job) => [job.job_key, job.status])), { build: 'success', lint: 'success', test: 'failed', deploy: 'skipped' });
    const response = await rerun(first, { failedOnly: true });
    assert.equal(response.status, 201);
    const answer = (await response.json()) as { runId: string; rerunOf: string; failedOnly: boolean; rerunJobs: string[]; carriedJobs: string[] };
    assert.deepEqual([answer.rerunOf, answer.failedOnly, answer.rerunJobs, answer.carriedJobs], [first, true, ['test', 'deploy'], ['build', 'lint']]);
    const again = await client.waitForRunStatus(answer.runId, 'success');
    assert.deepEqual(
      dispatched.filter(([run]) => run === 'rerun'),
      [
        ['rerun', 'test', { build: 'success' }],
        ['rerun', 'deploy', { test: 'success' }],
      ],
      'only the failed job and its dependant were dispatched; the test job saw the carried build as its upstream',
    );
    const carried = again.jobs.filter((job) => ['build', 'lint'].includes(job.job_key));
    assert.deepEqual(carried.map((job) => [job.job_key, job.status, job.attempt, job.outcome]), [
      ['build', 'success', 0, `carried over from run ${first}`],
      ['lint', 'success', 0, `carried over from run ${first}`],
    ]);
  });

  it('failedOnly on a run with no failed job is 409 with the reason; a whole rerun of it still works', async () => {
    const label = `all-good-${randomUUID().slice(0, 8)}`;
    agents.push(await FakeAgent.connect(client.wsUrl, token, { labels: [label], onDispatch: (d, agent) => agent.runAtOnce(d) }));
    const good = await client.createRun(runStepsWorkflow('good', label, [{ name: 'only', steps: [['s', 'true']] }]));
    await client.waitForRunStatus(good, 'success');
    const refused = await rerun(good, { failedOnly: true });
    assert.equal(refused.status, 409);
    assert.deepEqual(await refused.json(), { error: 'nothing to rerun', reason: `run ${good} has no failed or cancelled job; rerun the whole run instead` });
    const running = await waitingRun();
    const busy = await rerun(running, { failedOnly: true });
    assert.equal(busy.status, 409);
    assert.equal(((await busy.json()) as { error: string }).error, 'run not finished');
    await client.cancel(running, { force: true });
    assert.equal((await rerun(good, { failedOnly: false })).status, 201);
  });
});
