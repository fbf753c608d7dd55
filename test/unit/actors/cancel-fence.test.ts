import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { pino } from 'pino';
import { CancelFence } from '../../../actors/agents/cancel-fence.ts';
import { Dispatcher } from '../../../actors/agents/dispatcher.ts';
import { AgentEffects } from '../../../actors/agents/effects.ts';
import { AgentRegistry } from '../../../actors/agents/registry.ts';
import type { AgentSession } from '../../../actors/agents/registry.ts';
import type { SharedAgents, WaitingCancel } from '../../../actors/agents/shared-agents.ts';
import type { Effect } from '../../../actors/runs/ports.ts';
import type { IncomingRunEvent } from '../../../actors/runs/supervisor.ts';
import { answerInline } from '../../../actors/runs/inline-placement.ts';
import type { Intent } from '../../../machines/intents.ts';
import type { AgentRequirements } from '../../../machines/types.ts';
import { ManualClock } from '../../support/manual-clock.ts';

const log = pino({ level: 'silent' });
const POLL_MS = 200;
const MAX_HOLD_MS = 3_000;
const RECOVERY_MS = 10_000;
const LINUX: AgentRequirements = { runsOn: [{ kind: 'exact', value: 'linux' }], excludeLabels: [], runsOnPick: 'deterministic', executor: 'any' };

function session(agentId: string): AgentSession {
  return {
    ...{ agentId, labels: ['linux'], taints: [], properties: { 'switchyard.runSteps': true }, connectionId: `c-${agentId}`, tokenId: null },
    ...{ maxConcurrency: 1, scalerManaged: false, unusable: null, lastFrameAt: 0, slots: new Map(), sent: new Set<string>() },
    link: { send: () => undefined, close: () => undefined },
  };
}

/** A dispatcher with one free agent here, and a fence whose commands are carried out when `waiting` says so. */
function setup() {
  const clock = new ManualClock();
  const registry = new AgentRegistry(() => clock.now());
  const told: IncomingRunEvent[] = [];
  const dispatcher = new Dispatcher(registry, (_runId, event) => Promise.resolve(void told.push(event)), log);
  const commands = new Map<number, boolean>();
  /** Cancels left by the previous owner of restored runs. */
  const stored: WaitingCancel[] = [];
  /** Agents with a socket somewhere; an Error: the question fails. */
  const reachable = new Map<string, boolean | Error>();
  const fence = new CancelFence({
    commandsWaiting: (ids) => Promise.resolve(new Set(ids.filter((id) => commands.get(id) === true))),
    cancelsWaitingFor: (runIds) => Promise.resolve(stored.filter((cancel) => runIds.includes(cancel.runId) && commands.get(cancel.commandId) === true)),
    agentReachable: (agentId) => {
      const answer = reachable.get(agentId) ?? false;
      return answer instanceof Error ? Promise.reject(answer) : Promise.resolve(answer);
    },
    onLifted: () => void dispatcher.offer(),
    ...{ clock, pollMs: POLL_MS, maxHoldMs: MAX_HOLD_MS, unreachableHoldMs: RECOVERY_MS, log },
  });
  dispatcher.attachCancelFence(fence);
  registry.add(session('agent-here'));
  const request = () => dispatcher.requestPlacement({ runId: 'run-1', kind: 'requestPlacement', effectId: 'run-1:3:0', payload: { jobKey: 'build', requirements: LINUX, attempt: 2 } });
  const grants = () => told.filter((event) => event.type === 'placement.granted');
  return { clock, dispatcher, registry, fence, commands, stored, reachable, told, request, grants };
}

/** The agent effects of this coordinator, whose cancels raise `fence`; `shared` is the agents' session table. */
function agentEffects(parts: { registry: AgentRegistry; fence: CancelFence; clock: ManualClock }, shared: SharedAgents | null = null): AgentEffects {
  const { registry, fence, clock } = parts;
  return new AgentEffects({
    ...{ registry, deliver: () => Promise.resolve(), shared, aliveWindowMs: 1_000, now: () => clock.now(), log, fence },
    buildDispatch: { build: () => Promise.reject(new Error('no dispatch here')), complete: () => Promise.reject(new Error('no dispatch here')) },
  });
}

/** The cancel that comes with an ack-timeout requeue of the job's attempt on `agentId`. */
function ackTimeoutCancel(agentId: string): Effect<'sendCancel'> {
  return { effectId: 'run-1:2:0', runId: 'run-1', kind: 'sendCancel', payload: { jobKey: 'build', agentId, dispatchId: 'd-1', force: true, reason: 'dispatch ack timeout' } };
}

describe('B7: a job whose cancel waits on another coordinator is not granted again', () => {
  it('waits with the reason until the peer has passed the cancel on, then takes the free agent', async () => {
    const { clock, dispatcher, fence, commands, told, request, grants } = setup();
    commands.set(41, true);
    fence.raise('run-1', 'build', { agentId: 'agent-on-b', coordinatorId: 'coord-b', commandId: 41 });
    await request();
    assert.deepEqual(grants(), [], 'an agent is free here, and the job is not granted');
    assert.deepEqual(told.map((event) => event.type === 'placement.none' && event.reason), [
      { kind: 'previous_attempt', message: 'waiting for coordinator coord-b to pass on the cancel of the previous attempt to agent agent-on-b' },
    ]);
    assert.equal(dispatcher.placeNow('run-1', { jobKey: 'build', requirements: LINUX, attempt: 2 }), null, 'nor granted in the entry that asks');
    await clock.advance(5 * POLL_MS);
    assert.deepEqual(grants(), [], 'still waiting while the command is');
    commands.set(41, false);
    await clock.advance(POLL_MS);
    assert.equal(grants().length, 1, 'granted once the command is carried out');
    fence.stop();
  });

  it('a run restored here (a takeover) raises again the fence its previous owner raised: its job waits for the same cancel', async () => {
    const { clock, dispatcher, fence, commands, stored, told, request, grants } = setup();
    commands.set(41, true);
    stored.push({ commandId: 41, coordinatorId: 'coord-b', agentId: 'agent-on-b', runId: 'run-1', jobKey: 'build', sentAt: clock.now() - 100 });
    await fence.raiseStored(['run-1', 'run-2']);
    await request();
    assert.deepEqual(grants(), [], 'the adopted job is not granted while its previous attempt’s cancel waits');
    const last = told.at(-1);
    assert.equal(last?.type === 'placement.none' && last.reason.kind, 'previous_attempt');
    assert.equal(dispatcher.placeNow('run-1', { jobKey: 'build', requirements: LINUX, attempt: 2 }), null);
    commands.set(41, false);
    await clock.advance(POLL_MS);
    assert.equal(grants().length, 1, 'granted once the peer has passed the cancel on');
    fence.stop();
  });

  it('a restored fence keeps its longest hold from when the cancel was left, and a failed question raises none', async () => {
    const { clock, fence, commands, stored, request, grants } = setup();
    commands.set(41, true);
    stored.push({ commandId: 41, coordinatorId: 'coord-b', agentId: 'agent-on-b', runId: 'run-1', jobKey: 'build', sentAt: clock.now() - (MAX_HOLD_MS - 2 * POLL_MS) });
    await fence.raiseStored(['run-1']);
    await request();
    assert.deepEqual(grants(), []);
    await clock.advance(3 * POLL_MS);
    assert.equal(grants().length, 1, 'down at the cancel’s own longest hold, though the command still waits');
    (fence as unknown as { ports: { cancelsWaitingFor: () => Promise<never> } }).ports.cancelsWaitingFor = () => Promise.reject(new Error('connection terminated'));
    await fence.raiseStored(['run-1']);
    assert.equal(fence.holds('run-1', 'build'), null);
    fence.stop();
  });

  it('comes down after its longest hold, and goes on asking while the database does not answer', async () => {
    const { clock, fence, request, grants } = setup();
    const failing = { asked: 0 };
    (fence as unknown as { ports: { commandsWaiting: () => Promise<Set<number>> } }).ports.commandsWaiting = () => {
      failing.asked += 1;
      return Promise.reject(new Error('connection terminated'));
    };
    fence.raise('run-1', 'build', { agentId: 'agent-on-b', coordinatorId: 'coord-b', commandId: 7 });
    await request();
    await clock.advance(MAX_HOLD_MS - POLL_MS);
    assert.deepEqual(grants(), [], 'a failed question keeps the fence up');
    assert.ok(failing.asked >= 10);
    await clock.advance(2 * POLL_MS);
    assert.equal(grants().length, 1, 'but not for ever');
    fence.stop();
  });

  it('a cancel that finds no socket of its agent anywhere holds the job until the agent is back', async () => {
    const { clock, dispatcher, registry, fence, reachable, told, request, grants } = setup();
    // agent-gone's socket was cut between the ack hold's look and this cancel: no session of it anywhere.
    await agentEffects({ registry, fence, clock }).sendCancel(ackTimeoutCancel('agent-gone'));
    await request();
    assert.deepEqual(grants(), [], 'an agent is free here, and the requeued attempt is not granted while the first may still run');
    const last = told.at(-1);
    assert.equal(last?.type === 'placement.none' && last.reason.message, "waiting for agent agent-gone, which lost its socket before the previous attempt's cancel reached it, to reconnect (the attempt is then cancelled) or for its recovery window to pass");
    assert.equal(dispatcher.placeNow('run-1', { jobKey: 'build', requirements: LINUX, attempt: 2 }), null);
    await clock.advance(5 * POLL_MS);
    assert.deepEqual(grants(), []);
    reachable.set('agent-gone', true);
    await clock.advance(POLL_MS);
    assert.equal(grants().length, 1, 'granted once the agent is back (its reclaim of the old attempt is refused and cancelled)');
    fence.stop();
  });

  it('a cancel whose agent registers here while its session is looked up goes on the new socket, and holds nothing', async () => {
    const { clock, registry, fence } = setup();
    const sent: object[] = [];
    const shared = {
      remoteSession: () => {
        registry.add({ ...session('agent-back'), link: { send: (frame: object) => void sent.push(frame), close: () => undefined } });
        return Promise.resolve(null);
      },
    } as unknown as SharedAgents;
    await agentEffects({ registry, fence, clock }, shared).sendCancel(ackTimeoutCancel('agent-back'));
    assert.deepEqual(sent.map((frame) => (frame as { type: string; jobId: string }).jobId), ['d-1']);
    assert.equal(fence.holds('run-1', 'build'), null);
    fence.stop();
  });

  it('an unreachable agent’s fence comes down after its recovery window, and stays up meanwhile when the question fails', async () => {
    const { clock, fence, reachable, request, grants } = setup();
    reachable.set('agent-gone', new Error('connection terminated'));
    fence.raiseUnreachable('run-1', 'build', 'agent-gone');
    await request();
    await clock.advance(RECOVERY_MS - POLL_MS);
    assert.deepEqual(grants(), [], 'a failed question keeps the fence up');
    await clock.advance(2 * POLL_MS);
    assert.equal(grants().length, 1, 'but not past the recovery window');
    fence.stop();
  });

  it('the entry that cancels a job’s attempt does not place the job in the same entry', () => {
    const placed: string[] = [];
    const placement = { place: (_runId: string, request: { jobKey: string }) => (placed.push(request.jobKey), null), undo: () => undefined };
    const intents = [
      { type: 'sendCancel', params: { jobKey: 'build', agentId: 'agent-on-b', dispatchId: 'd-1', force: true, reason: 'dispatch ack timeout' } },
      { type: 'requestPlacement', params: { jobKey: 'build', requirements: LINUX, attempt: 2 } },
      { type: 'requestPlacement', params: { jobKey: 'test', requirements: LINUX, attempt: 1 } },
    ] as unknown as Intent[];
    const answered = answerInline({ runId: 'run-1', closing: false, send: () => [], nextSeq: () => 1, stateAfter: () => null, intents, placement, at: 0 });
    assert.deepEqual(placed, ['test'], 'only the job whose attempt was not cancelled is placed inline');
    assert.equal(answered.intents.filter((intent) => intent.type === 'requestPlacement').length, 2, 'both requests stay for the queue');
  });
});
