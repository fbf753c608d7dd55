import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, it } from 'node:test';
import { skipReason } from '../../support/database.ts';
import { coordinatorSuite } from '../../support/coordinator-suite.ts';
import { runStepsWorkflow, type FakeAgent } from '../../support/fake-agent.ts';
import { createLockRepo, lockFileWith, pushWorkflow, runJob } from '../../support/lock-repo.ts';
import { eventually } from '../../support/runtime.ts';

const LABEL = 'events';

/** A workflow that runs on an emitted event named `eventName` (docs/events.md). */
function onEvent(name: string, eventName: string, extra: object = {}): object {
  return {
    ...pushWorkflow(name, [runJob('react', ['true'], { runsOn: [{ kind: 'exact', value: LABEL }] })]),
    triggers: [{ _type: 'kici_event', eventName, ...extra }],
  };
}

interface EmittedView {
  eventName: string;
  jobKey: string;
  deliveries: { repository: string; status: string; runIds: string[] }[];
}
interface RunWithLinks {
  run: { run_id: string; workflow_name: string; input_summary: { trustTier?: string; event?: { type: string; payload: Record<string, unknown> } } };
  emittedEvents: EmittedView[];
  triggeredBy: { eventName: string; runId: string; jobKey: string; repository: string } | null;
}

describe('ctx.emit: an emitted event starts the workflows that trigger on it, linked both ways', { skip: await skipReason('external') }, () => {
  const suite = coordinatorSuite('external', { env: { SWITCHYARD_SECRET_KEY: '24'.repeat(32) } });

  async function register(name: string, lock: string, acceptsEventsFrom: string[] = []) {
    const repo = await createLockRepo();
    repo.commit({ '.kici/kici.lock.json': lock });
    await suite.client.json('/api/v1/repositories', { method: 'POST', body: JSON.stringify({ name, provider: 'local', path: repo.path, acceptsEventsFrom }) }, 201);
  }

  async function emit(agent: FakeAgent, jobId: string, eventName: string, payload: object, target?: object) {
    const requestId = randomUUID();
    agent.send({ type: 'event.emit', jobId, requestId, eventName, payload, ...(target && { target }) });
    return agent.next('event.emit.response', (m) => m.requestId === requestId);
  }

  it('the same repository and one that accepts the sender get a run each; one that does not, none; the runs name each other', async () => {
    await register('acme/app', lockFileWith([onEvent('app-on-deployed', 'deployed', { match: { '$.env': 'prod' } }), onEvent('app-on-other', 'other')]));
    await register('acme/docs', lockFileWith([onEvent('docs-on-deployed', 'deployed', { source: 'acme/app' })]), ['acme/*']);
    await register('other/site', lockFileWith([onEvent('site-on-deployed', 'deployed')]));
    const agent = await suite.connect({ labels: [LABEL], maxConcurrency: 4 });
    const emitterRunId = await suite.client.createRun(runStepsWorkflow('emitter', LABEL, [{ name: 'deploy', steps: [['ship', 'true']] }]), { ref: 'main' });
    const dispatch = await agent.dispatch(0);
    agent.ack(dispatch);
    agent.status(dispatch, 'running');

    const staging = await emit(agent, dispatch.jobId, 'deployed', { env: 'staging' });
    const answer = await emit(agent, dispatch.jobId, 'deployed', { env: 'prod', version: '1.2.3' });
    assert.ok(staging.deliveryId && answer.deliveryId, JSON.stringify([staging, answer]));
    assert.equal(answer.error, undefined);

    const view = await eventually(async () => {
      const detail = await suite.client.json<RunWithLinks>(`/api/v1/runs/${emitterRunId}`);
      const done = detail.emittedEvents.length === 2 && detail.emittedEvents.every((event) => event.deliveries.every((d) => d.status !== 'received' && d.status !== 'processing'));
      return done ? detail : undefined;
    }, 20_000, 'both events delivered');
    const [first, second] = view.emittedEvents;
    assert.deepEqual(first?.deliveries.map((d) => [d.repository, d.runIds.length]), [['acme/app', 0], ['acme/docs', 1]], 'staging matches the docs trigger only (app wants env prod)');
    assert.deepEqual(second?.deliveries.map((d) => [d.repository, d.runIds.length]), [['acme/app', 1], ['acme/docs', 1]], 'other/site does not accept acme/app: not reached');
    assert.equal(second?.jobKey, 'deploy');

    const started = await suite.client.json<RunWithLinks>(`/api/v1/runs/${second?.deliveries[0]?.runIds[0]}`);
    assert.equal(started.run.workflow_name, 'app-on-deployed');
    assert.deepEqual(started.triggeredBy, { eventName: 'deployed', runId: emitterRunId, jobKey: 'deploy', repository: 'acme/app' });
    assert.equal(started.run.input_summary.trustTier, 'trusted', 'a trusted run emitted it');
    assert.deepEqual(started.run.input_summary.event?.payload['payload'], { env: 'prod', version: '1.2.3' });

    // The started runs reach the agent with the event as the stock agent's ctx.event reads it.
    const reacting = await eventually(() => {
      const frames = agent.received.filter((m): m is Extract<typeof m, { type: 'job.dispatch' }> => m.type === 'job.dispatch');
      return frames.find((frame) => frame.runId === started.run.run_id);
    }, 20_000, 'the started run is dispatched');
    const event = (reacting.jobConfig as { event?: { type: string; payload: { eventName: string; payload: object } } }).event;
    assert.deepEqual([event?.type, event?.payload.eventName, event?.payload.payload], ['kici_event', 'deployed', { env: 'prod', version: '1.2.3' }]);
  });

  it('an explicit target that is not registered, or does not accept the sender, is refused with the reason; a job not held too', async () => {
    const agent = await suite.connect({ labels: [LABEL], maxConcurrency: 1 });
    await suite.client.createRun(runStepsWorkflow('emitter-2', LABEL, [{ name: 'deploy', steps: [['ship', 'true']] }]), { ref: 'main' });
    const dispatch = await agent.dispatch(0);
    agent.ack(dispatch);
    const refused = await emit(agent, dispatch.jobId, 'deployed', {}, { repos: ['other/site'] });
    assert.match(refused.error ?? '', /repository other\/site does not accept events from acme\/app/);
    const unknown = await emit(agent, dispatch.jobId, 'deployed', {}, { repos: ['nobody/here'] });
    assert.match(unknown.error ?? '', /target repository nobody\/here is not registered/);
    const stranger = await suite.connect({ labels: ['stranger'] });
    const notHeld = await emit(stranger, dispatch.jobId, 'deployed', {});
    assert.match(notHeld.error ?? '', /is not an attempt this agent holds/);
    assert.equal(notHeld.deliveryId, undefined);
  });
});
