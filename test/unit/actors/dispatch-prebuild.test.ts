import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { pino } from 'pino';
import { AgentEffects, type BuiltFrame, type DispatchTarget } from '../../../actors/agents/effects.ts';
import { AgentRegistry } from '../../../actors/agents/registry.ts';
import type { AgentSession } from '../../../actors/agents/registry.ts';
import type { Effect } from '../../../actors/runs/ports.ts';

const settle = () => new Promise((resolve) => setImmediate(resolve));

function session(connectionId: string, sent: object[]): AgentSession {
  return {
    ...{ agentId: 'agent-1', labels: ['linux'], taints: [], properties: {}, connectionId, tokenId: null },
    ...{ maxConcurrency: 2, scalerManaged: false, unusable: null, lastFrameAt: 0, slots: new Map(), sent: new Set<string>() },
    link: { send: (frame: object) => void sent.push(frame), close: () => undefined },
  };
}

function dispatchEffect(dispatchId: string): Effect<'sendDispatch'> {
  const job = { baseName: 'build', matrix: null, initFor: null, upstream: null, resolved: null };
  return { runId: 'run-1', effectId: `run-1:1:${dispatchId}`, kind: 'sendDispatch', payload: { jobKey: 'build', agentId: 'agent-1', dispatchId, attempt: 1, job } };
}

/** Agent effects over a real registry, with a factory that counts its builds and completions. */
function setup() {
  const registry = new AgentRegistry(() => 0);
  const sent: object[] = [];
  const builds: string[] = [];
  const completions: string[] = [];
  const effects = new AgentEffects({
    registry,
    deliver: () => Promise.resolve(),
    reportCancel: () => Promise.resolve(),
    shared: null,
    aliveWindowMs: 1_000,
    now: () => 0,
    log: pino({ level: 'silent' }),
    buildDispatch: {
      build: (target: DispatchTarget): Promise<BuiltFrame> => {
        builds.push(`${target.dispatchId}@${target.agentLabels.join(',')}`);
        return Promise.resolve({ ok: true, dispatch: { type: 'job.dispatch', jobId: target.dispatchId, labels: target.agentLabels } });
      },
      complete: (built: BuiltFrame, target: DispatchTarget): Promise<BuiltFrame> => {
        completions.push(target.dispatchId);
        return Promise.resolve(built);
      },
    },
  });
  const connect = (connectionId: string) => {
    const agent = session(connectionId, sent);
    registry.add(agent);
    return agent;
  };
  return { registry, effects, sent, builds, completions, connect };
}

describe('dispatch frames built while their entry commits', () => {
  it('are built ahead but sent only by the send after the commit, which builds nothing again; secrets are still added then', async () => {
    const { registry, effects, sent, builds, completions, connect } = setup();
    connect('c-1');
    registry.reserve('agent-1', 'd-1', { runId: 'run-1', jobKey: 'build' });
    effects.prepareDispatches([dispatchEffect('d-1')]);
    await settle();
    assert.deepEqual(builds, ['d-1@linux'], 'built while the entry commits');
    assert.deepEqual(sent, [], 'nothing sent before the commit');
    assert.deepEqual(completions, [], 'no secret resolved before the commit');
    await effects.sendDispatch(dispatchEffect('d-1'));
    assert.deepEqual(builds, ['d-1@linux'], 'the send takes the frame built ahead');
    assert.deepEqual(completions, ['d-1']);
    assert.deepEqual(sent, [{ type: 'job.dispatch', jobId: 'd-1', labels: ['linux'] }]);
  });

  it('a frame whose entry did not commit is dropped; a send without one builds its own', async () => {
    const { registry, effects, sent, builds, connect } = setup();
    connect('c-1');
    registry.reserve('agent-1', 'd-2', { runId: 'run-1', jobKey: 'build' });
    effects.prepareDispatches([dispatchEffect('d-2')]);
    effects.forgetDispatches([dispatchEffect('d-2')]);
    await settle();
    await effects.sendDispatch(dispatchEffect('d-2'));
    assert.deepEqual(builds, ['d-2@linux', 'd-2@linux'], 'built again for the send');
    assert.equal(sent.length, 1);
  });

  it('a frame built for a connection that closed before the commit is never sent on the next one', async () => {
    const { registry, effects, sent, connect } = setup();
    connect('c-1');
    registry.reserve('agent-1', 'd-3', { runId: 'run-1', jobKey: 'build' });
    effects.prepareDispatches([dispatchEffect('d-3')]);
    await settle();
    registry.remove('agent-1', 'c-1');
    connect('c-2');
    await effects.sendDispatch(dispatchEffect('d-3'));
    assert.deepEqual(sent, [], 'its slot was reserved on the closed connection');
  });
});
