import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { createServer, connect as tcpConnect, type Server, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import { describe, it } from 'node:test';
import { DATABASE_KINDS, skipReason, tempDir } from '../../support/database.ts';
import { coordinatorSuite } from '../../support/coordinator-suite.ts';
import { FakeAgent, runStepsWorkflow, spawnRealAgent } from '../../support/fake-agent.ts';
import { eventually } from '../../support/runtime.ts';

const RECOVERY_MS = 2000;
const ENV = { SWITCHYARD_RECOVERY_WINDOW_MS: String(RECOVERY_MS) };


/** A TCP relay in front of the coordinator whose connections the test can cut (a network drop, no close frame). */
async function relayTo(port: number): Promise<{ port: number; cut: () => void; close: () => Promise<void> }> {
  const sockets = new Set<Socket>();
  const server: Server = createServer((downstream) => {
    const upstream = tcpConnect(port, '127.0.0.1');
    for (const socket of [downstream, upstream]) {
      sockets.add(socket);
      socket.on('error', () => socket.destroy());
      socket.on('close', () => sockets.delete(socket));
    }
    downstream.pipe(upstream).pipe(downstream);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const cut = () => {
    for (const socket of sockets) socket.destroy();
  };
  return {
    port: (server.address() as AddressInfo).port,
    cut,
    close: () => new Promise((resolve) => (cut(), server.close(() => resolve()))),
  };
}

for (const kind of DATABASE_KINDS) {
  describe(`agent reconnect and cancel (${kind} Postgres)`, { skip: await skipReason(kind) }, () => {
    const suite = coordinatorSuite(kind, { env: ENV });
    const { connect } = suite;

    async function runningJob(label: string) {
      const agentId = `flaky-${label}`;
      const agent = await connect({ labels: [label], agentId });
      const runId = await suite.client.createRun(runStepsWorkflow(`wf-${label}`, label, [{ name: 'build', steps: [['step', 'true']] }]));
      const dispatch = await agent.dispatch(0);
      agent.ack(dispatch);
      agent.status(dispatch, 'running');
      agent.step(dispatch, 0, 'step', 'running');
      agent.log(dispatch, 0, ['before the drop']);
      // Frames still queued on a socket when it drops are not applied: wait until all four are.
      await eventually(async () => (await suite.client.logs(runId)).length === 1, 5_000, 'the first log chunk');
      await suite.client.waitForJob(runId, 'build', (j) => j.status === 'running', 5_000, 'running');
      return { agentId, agent, runId, dispatch, inFlight: [{ jobId: dispatch.jobId, runId }] };
    }

    // Regression: a reclaim within 30 s of the drop was refused ("not owned") because freeing the slot marked the attempt ended.
    it('a dropped socket puts the job in recovering; reconnecting with inFlightJobs takes it back and it succeeds', async () => {
      const label = `reclaim-${randomUUID().slice(0, 8)}`;
      const { agentId, agent, runId, dispatch, inFlight } = await runningJob(label);
      agent.drop();
      await suite.client.waitForJob(runId, 'build', (j) => j.status === 'recovering', 5_000, 'recovering');

      const back = await connect({ labels: [label], agentId, inFlightJobs: inFlight });
      await suite.client.waitForJob(runId, 'build', (j) => j.status === 'running', 5_000, 'running again');
      // Outlive the recovery window: the reclaim disarmed it.
      await new Promise((resolve) => setTimeout(resolve, RECOVERY_MS + 500));
      assert.equal((await suite.client.job(runId, 'build')).status, 'running');
      back.log(dispatch, 0, ['after the reconnect']);
      back.step(dispatch, 0, 'step', 'success');
      back.status(dispatch, 'success');
      const view = await suite.client.waitForRunStatus(runId, 'success', 10_000);
      assert.equal(view.jobs[0]?.attempt, 1, 'the same attempt, not a requeue');
      assert.equal(back.received.filter((m) => m.type === 'job.cancel').length, 0, 'the reclaim was accepted');
      await eventually(async () => (await suite.client.logs(runId)).length === 2, 5_000, 'both log chunks');
      assert.deepEqual((await suite.client.logs(runId)).flatMap((c) => c.lines), ['before the drop', 'after the reconnect']);
      const types = (await suite.client.journal(runId)).map((e) => e.type);
      assert.ok(types.indexOf('agent.disconnected') < types.indexOf('agent.job.reclaim'), types.join(' → '));
      assert.ok(!types.includes('timer.recovery.expired'));
    });

    it('a job.status sent after auth but before agent.register is held and applied once the agent re-registered (§5)', async () => {
      const label = `held-${randomUUID().slice(0, 8)}`;
      const { agentId, agent, runId, dispatch, inFlight } = await runningJob(label);
      agent.drop();
      await suite.client.waitForJob(runId, 'build', (j) => j.status === 'recovering', 5_000, 'recovering');
      const back = await FakeAgent.open(suite.client.wsUrl, { labels: [label], agentId, inFlightJobs: inFlight });
      suite.afterTest(() => back.close());
      await back.authenticate(suite.token);
      back.status(dispatch, 'success');
      await back.register();
      const view = await suite.client.waitForRunStatus(runId, 'success', 10_000);
      assert.equal(view.jobs[0]?.attempt, 1);
      assert.ok(back.isOpen, 'holding frames is not a protocol violation');
      assert.equal(back.received.filter((m) => m.type === 'job.cancel').length, 0, 'the reclaim was accepted');
    });

    it('the real agent survives a network cut mid-step: it re-registers with inFlightJobs and the job succeeds', async () => {
      const label = `relay-${randomUUID().slice(0, 8)}`;
      const relay = await relayTo(Number(new URL(suite.client.url).port));
      try {
        const agent = spawnRealAgent({
          wsUrl: `ws://127.0.0.1:${relay.port}/ws/agent`,
          token: suite.token,
          labels: [label],
          agentId: `real-${label}`,
          workDir: await tempDir('sy-relay-agent-'),
          extra: ['--reconnect-base-ms', '100'],
        });
        suite.afterTest(() => agent.kill());
        const workflow = runStepsWorkflow(`wf-${label}`, label, [{ name: 'build', steps: [['slow', 'echo started; sleep 2; echo finished']] }]);
        const runId = await suite.client.createRun(workflow);
        await eventually(async () => (await suite.client.logs(runId)).some((c) => c.lines.includes('started')), 30_000, 'the step to start');
        relay.cut();
        const view = await suite.client.waitForRunStatus(runId, 'success', 20_000);
        assert.equal(view.jobs[0]?.attempt, 1);
        const types = (await suite.client.journal(runId)).map((e) => e.type);
        assert.ok(types.includes('agent.disconnected') && types.includes('agent.job.reclaim'), types.join(' → '));
        const lines = (await suite.client.logs(runId)).flatMap((c) => c.lines);
        assert.ok(lines.includes('finished'), lines.join('|'));
      } finally {
        await relay.close();
      }
    });

    it('cancel during a running job sends job.cancel without force; the agent reports cancelled and the job ends cancelled', async () => {
      const label = `cancel-${randomUUID().slice(0, 8)}`;
      const { agent, runId, dispatch } = await runningJob(label);
      await suite.client.cancel(runId, { reason: 'operator said stop' });
      const cancel = await agent.next('job.cancel', (m) => m.jobId === dispatch.jobId, 5_000);
      assert.equal(cancel.force, false);
      assert.equal(cancel.reason, 'operator said stop');
      assert.equal(cancel.runId, runId);
      await suite.client.waitForJob(runId, 'build', (j) => j.status === 'cancelling', 5_000, 'cancelling');
      agent.status(dispatch, 'cancelled');
      const view = await suite.client.waitForRunStatus(runId, 'cancelled', 10_000);
      assert.equal(view.jobs[0]?.status, 'cancelled');
    });

    it('a forced cancel sends job.cancel {force:true} and ends the job at once', async () => {
      const label = `force-${randomUUID().slice(0, 8)}`;
      const { agent, runId, dispatch } = await runningJob(label);
      await suite.client.cancel(runId, { force: true });
      const cancel = await agent.next('job.cancel', (m) => m.jobId === dispatch.jobId, 5_000);
      assert.equal(cancel.force, true);
      const view = await suite.client.waitForRunStatus(runId, 'cancelled', 10_000);
      assert.equal(view.jobs[0]?.status, 'cancelled');
    });
  });
}
