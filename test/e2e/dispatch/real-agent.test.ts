import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, it } from 'node:test';
import { DATABASE_KINDS, skipReason, tempDir } from '../../support/database.ts';
import { coordinatorSuite } from '../../support/coordinator-suite.ts';
import { ADMIN_TOKEN } from '../../support/processes.ts';
import { runStepsWorkflow, spawnRealAgent, type JournalEvent, type RealAgentProcess } from '../../support/fake-agent.ts';
import { eventually } from '../../support/runtime.ts';
import { cleanup as removeRepos, createRepo } from '../agent/fixtures.ts';

const ENV = { SWITCHYARD_DISPATCH_ACK_TIMEOUT_MS: '1000', SWITCHYARD_RECOVERY_WINDOW_MS: '2000' };

/** The journal of one job, as `type[:state]`, in commit order. */
function jobJournal(events: JournalEvent[], jobKey: string): string[] {
  return events.filter((e) => e.jobKey === jobKey).map((e) => (e.state ? `${e.type}:${e.state}` : e.type));
}

function inOrder(sequence: string[], expected: string[]): boolean {
  let at = 0;
  for (const item of sequence) if (item === expected[at]) at += 1;
  return at === expected.length;
}


for (const kind of DATABASE_KINDS) {
  describe(`dispatch to the real agent process (${kind} Postgres)`, { skip: await skipReason(kind) }, () => {
    const suite = coordinatorSuite(kind, { env: ENV, afterAll: removeRepos });

    async function startAgent(label: string, extra: string[] = []): Promise<RealAgentProcess> {
      const agent = spawnRealAgent({ wsUrl: suite.client.wsUrl, token: suite.token, labels: [label], agentId: `real-${label}`, workDir: await tempDir('sy-dispatch-agent-'), extra });
      suite.afterTest(() => agent.kill());
      return agent;
    }

    it('runs two jobs of two steps from a file:// repository: run success, logs stored, journal ack → running → success', async () => {
      const label = `e2e-${randomUUID().slice(0, 8)}`;
      const repo = await createRepo({ 'greeting.txt': 'hello from the repository\n' });
      await startAgent(label);
      const workflow = runStepsWorkflow('two-jobs', label, [
        { name: 'build', steps: [['read', 'cat greeting.txt'], ['compile', 'echo compiled; echo warn >&2']] },
        { name: 'test', needs: ['build'], steps: [['unit', 'echo unit-ok'], ['lint', 'test -f greeting.txt && echo lint-ok']] },
      ]);
      const runId = await suite.client.createRun(workflow, { repoUrl: repo.url, ref: repo.ref, sha: repo.sha });
      const view = await suite.client.waitForRun(runId, (v) => ['success', 'failed', 'cancelled'].includes(v.run.status), 60_000, 'a final run');
      assert.equal(view.run.status, 'success', JSON.stringify(view.jobs));
      assert.deepEqual(view.jobs.map((j) => [j.job_key, j.status, j.attempt, j.agent_id]), [
        ['build', 'success', 1, `real-${label}`],
        ['test', 'success', 1, `real-${label}`],
      ]);

      const logs = await suite.client.logs(runId);
      const lines = (jobKey: string, stepIndex: number) => logs.filter((c) => c.jobKey === jobKey && c.stepIndex === stepIndex).flatMap((c) => c.lines);
      assert.deepEqual(lines('build', 0), ['hello from the repository']);
      assert.deepEqual([...lines('build', 1)].sort(), ['compiled', 'warn']);
      assert.deepEqual(lines('test', 0), ['unit-ok']);
      assert.deepEqual(lines('test', 1), ['lint-ok']);
      const text = await fetch(`${suite.client.url}/api/v1/runs/${runId}/logs?job=test&step=lint`, {
        headers: { authorization: `Bearer ${ADMIN_TOKEN}`, accept: 'text/plain' },
      }).then((res) => res.text());
      assert.equal(text, '[test › lint] lint-ok\n');
      // Regression (log order): the checkout line is the job's first line, before its steps' lines.
      const build = await fetch(`${suite.client.url}/api/v1/runs/${runId}/logs?job=build`, {
        headers: { authorization: `Bearer ${ADMIN_TOKEN}`, accept: 'text/plain' },
      }).then((res) => res.text());
      assert.match(build, /^\[build › runner\] \[switchyard\] cloning .*\n\[build › read\] hello from the repository\n/);
      const test = view.jobs.find((j) => j.job_key === 'test');
      assert.deepEqual(test?.steps.map((s) => [s.index, s.name, s.status, s.exitCode]), [
        [-1, 'runner', 'success', null], // the checkout, before the lock file's steps
        [0, 'unit', 'success', null],
        [1, 'lint', 'success', null],
      ]);
      assert.ok(test?.steps.every((s) => typeof s.durationMs === 'number'), JSON.stringify(test?.steps));

      const journal = await suite.client.journal(runId);
      for (const jobKey of ['build', 'test']) {
        const sequence = jobJournal(journal, jobKey);
        const expected = ['placement.granted', 'agent.job.ack', 'agent.job.status:running', 'agent.job.status:success'];
        assert.ok(inOrder(sequence, expected), `${jobKey}: ${sequence.join(' → ')}`);
        assert.equal(sequence.filter((s) => s === 'agent.job.status:success').length, 1, 'one terminal status');
      }
    });

    it('SIGKILL of the agent mid-job: the job goes recovering, then fails when the recovery window passes', async () => {
      const label = `kill-${randomUUID().slice(0, 8)}`;
      const agent = await startAgent(label);
      const runId = await suite.client.createRun(runStepsWorkflow('killed', label, [{ name: 'build', steps: [['long', 'echo started; sleep 30']] }]));
      await eventually(async () => (await suite.client.logs(runId)).some((c) => c.lines.includes('started')), 30_000, 'the step to start');
      await agent.kill('SIGKILL');
      await suite.client.waitForJob(runId, 'build', (j) => j.status === 'recovering', 10_000, 'recovering');
      const failed = await suite.client.waitForRunStatus(runId, 'failed', 10_000);
      const job = failed.jobs[0];
      assert.equal(job?.status, 'failed');
      assert.equal(job?.outcome, 'agent did not reconnect within the recovery window');
      const sequence = jobJournal(await suite.client.journal(runId), 'build');
      assert.ok(inOrder(sequence, ['agent.job.ack', 'agent.job.status:running', 'agent.disconnected', 'timer.recovery.expired']), sequence.join(' → '));
    });

    it('a graceful cancel reaches the agent: it stops the step and the job ends cancelled', async () => {
      const label = `cancel-${randomUUID().slice(0, 8)}`;
      const agent = await startAgent(label);
      const workflow = runStepsWorkflow('cancelled', label, [{ name: 'build', gracePeriod: 5, steps: [['long', 'echo started; sleep 30']] }]);
      const runId = await suite.client.createRun(workflow);
      await eventually(async () => (await suite.client.logs(runId)).some((c) => c.lines.includes('started')), 30_000, 'the step to start');
      const started = Date.now();
      await suite.client.cancel(runId, { reason: 'stop it' });
      const view = await suite.client.waitForRunStatus(runId, 'cancelled', 15_000);
      assert.ok(Date.now() - started < 10_000, 'the agent stopped the step instead of letting sleep 30 finish');
      assert.equal(view.jobs[0]?.status, 'cancelled');
      assert.equal(view.jobs[0]?.outcome, 'stop it', 'the cancel’s reason is the job’s outcome');
      assert.equal(view.run.failure_reason, 'Cancelled: stop it');
      assert.deepEqual(view.jobs[0]?.steps.filter((step) => step.status === 'running'), [], 'no step is left running');
      await eventually(() => /"kind":"cancel","force":false/.test(agent.output()), 5_000, 'the agent to log a graceful job.cancel (its log comes through a pipe)');
      const sequence = jobJournal(await suite.client.journal(runId), 'build');
      assert.ok(inOrder(sequence, ['agent.job.status:running', 'agent.job.status:cancelled']), sequence.join(' → '));
    });
  });
}
