import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { runtimeRunMachine } from '../../../actors/runs/intent-recorder.ts';
import { SNAPSHOT_VERSION } from '../../../actors/runs/supervisor.ts';
import type { IncomingRunEvent } from '../../../actors/runs/supervisor.ts';
import { replayRecordedRun } from '../../../src/replay/engine.ts';
import { ReplayJournalError, ReplayRangeError, ReplayVersionError } from '../../../src/replay/errors.ts';
import { formatReport } from '../../../src/replay/format.ts';
import { jobPlan, need, runInput } from '../../support/machines.ts';
import { firing, recordInMemory } from './recording.ts';

const agent = { agentId: 'agent-1', dispatchId: 'd-1' };
const agent2 = { agentId: 'agent-2', dispatchId: 'd-2' };
const ev = (event: IncomingRunEvent) => event;

/** build (ack timeout → withdrawn, its cancel sent → requeue → success on a second agent), then test (disconnect → recovery → reclaim). */
function recordedRun(steps = Infinity) {
  const input = runInput([jobPlan('build'), jobPlan('test', { needs: [need('build')] })], { runId: 'run-r' });
  return recordInMemory(input, RUN_STEPS.slice(0, steps));
}

const RUN_STEPS = [
    ev({ type: 'placement.granted', jobKey: 'build', ...agent, agentKind: 'static' }),
    firing('build', 'ack'),
    ev({ type: 'ack.holder', jobKey: 'build', holder: { kind: 'here' }, leaseTtlMs: 10_000, leaseRenewMs: 2_000 }),
    ev({ type: 'cancel.reported', jobKey: 'build', dispatchId: agent.dispatchId, holder: { kind: 'sent' }, pollMs: 2_000 }),
    ev({ type: 'placement.none', jobKey: 'build', reason: { kind: 'capacity', message: 'every agent is busy' } }),
    ev({ type: 'placement.granted', jobKey: 'build', ...agent2, agentKind: 'static' }),
    ev({ type: 'agent.job.ack', jobKey: 'build', ...agent2 }),
    ev({ type: 'agent.job.status', jobKey: 'build', ...agent2, state: 'running' }),
    ev({ type: 'agent.job.status', jobKey: 'build', ...agent2, state: 'success' }),
    ev({ type: 'placement.granted', jobKey: 'test', ...agent, agentKind: 'static' }),
    ev({ type: 'agent.job.ack', jobKey: 'test', ...agent }),
    ev({ type: 'agent.job.status', jobKey: 'test', ...agent, state: 'running' }),
    ev({ type: 'agent.disconnected', jobKey: 'test', agentId: agent.agentId }),
    ev({ type: 'agent.job.reclaim', jobKey: 'test', ...agent }),
    ev({ type: 'agent.job.status', jobKey: 'test', ...agent, state: 'success' }),
];

describe('replay engine', () => {
  it('replays a recorded run exactly: every step matches and the end state equals the stored snapshot', async () => {
    const recorded = recordedRun();
    const report = await replayRecordedRun(recorded);
    assert.equal(report.divergence, null);
    assert.equal(report.failure, null);
    assert.deepEqual(report.snapshotCheck, { compared: true, seq: 15, equal: true, differences: [] });
    assert.equal(report.exact, true);
    assert.equal(report.steps.length, 16);
    assert.equal(report.steps.at(-1)?.after.run, 'success');
    const [timeout, answered, reported] = report.steps.slice(2, 5);
    assert.equal(timeout?.type, 'timer.ack.expired');
    assert.deepEqual(timeout?.before?.jobs['build'], { assigned: { dispatched: 'awaitingAck' } });
    assert.deepEqual(timeout?.intents.map((i) => i.type), ['askAckHolder']);
    assert.equal(timeout?.deadlines.fired, 'build#ack');
    assert.deepEqual(answered?.after.jobs['build'], { withdrawing: 'cancelling' });
    assert.deepEqual(answered?.intents.map((i) => i.type), ['sendCancel', 'closeAgentConnection', 'releaseSlot']);
    assert.ok(answered?.deadlines.disarmed.includes('build#ack'));
    assert.ok(answered?.deadlines.armed.some((d) => d.id === 'build#fence'));
    assert.deepEqual(reported?.intents.map((i) => i.type), ['requestPlacement']);
    assert.equal(report.steps[5]?.waiting['build']?.message, 'every agent is busy');
    assert.deepEqual(report.steps[13]?.after.jobs['test'], { recovering: 'afterStart' });
    assert.ok(report.steps[13]?.deadlines.armed.some((d) => d.id === 'test#recovery'));
  });

  it('stops at any seq and exports the persisted snapshot of that point', async () => {
    const recorded = recordedRun();
    const report = await replayRecordedRun(recorded, { to: 6 });
    assert.equal(report.steps.length, 7);
    assert.equal(report.to, 6);
    assert.deepEqual(report.snapshot.value, { active: 'pending' });
    assert.deepEqual(report.snapshot.children?.['build']?.snapshot.value, { assigned: { dispatched: 'awaitingAck' } });
    assert.equal((report.snapshot.children?.['build']?.snapshot.context as { attempt: number }).attempt, 2);
    assert.equal(report.snapshotCheck.compared, false);
    assert.equal(report.exact, true);
    await assert.rejects(replayRecordedRun(recorded, { to: 99 }), ReplayRangeError);
  });

  it('reports the first divergence when one journaled state was changed', async () => {
    const recorded = recordedRun();
    const record = recorded.journal[8];
    assert.ok(record);
    record.stateAfter = { run: { active: 'running' }, jobs: { build: 'failed', test: { waiting: 'gated' } } };
    const report = await replayRecordedRun(recorded);
    assert.equal(report.divergence?.seq, 8);
    assert.deepEqual(report.divergence?.differences.map((d) => d.path), ['jobs.build']);
    assert.equal(report.exact, false);
    assert.match(formatReport(report), /DIVERGED first at seq 8 \(agent\.job\.status\)/);
  });

  it('reports the first divergence when the chart changed: a run that no longer forwards job events', async () => {
    const recorded = recordedRun();
    const altered = (sink: Parameters<typeof runtimeRunMachine>[0]) =>
      runtimeRunMachine(sink).provide({ guards: { targetsOpenJob: () => false } });
    const report = await replayRecordedRun(recorded, { machine: altered });
    assert.equal(report.divergence?.seq, 1);
    assert.equal(report.divergence?.eventType, 'placement.granted');
    assert.equal(report.snapshotCheck.compared && report.snapshotCheck.equal, false);
  });

  it('finds a difference only in the end snapshot (context) even when every summary matches', async () => {
    const recorded = recordedRun();
    const stored = recorded.snapshot;
    assert.ok(stored);
    stored.snapshot.context.failureReason = 'tampered';
    const report = await replayRecordedRun(recorded);
    assert.equal(report.divergence, null);
    assert.deepEqual(report.snapshotCheck.compared && report.snapshotCheck.differences.map((d) => d.path), ['context.failureReason']);
    assert.equal(report.exact, false);
  });

  it('compares a snapshot stored behind the journal (a tail after it) with the replayed state at its seq', async () => {
    const recorded = { ...recordedRun(), snapshot: recordedRun(9).snapshot };
    const report = await replayRecordedRun(recorded);
    assert.deepEqual(report.snapshotCheck, { compared: true, seq: 9, equal: true, differences: [] });
    assert.equal(report.exact, true);
    assert.equal(report.steps.length, 16, 'the tail is replayed too');
    assert.ok(recorded.snapshot);
    recorded.snapshot.snapshot.context.failureReason = 'tampered';
    const tampered = await replayRecordedRun(recorded);
    assert.equal(tampered.snapshotCheck.compared && tampered.snapshotCheck.equal, false);
    assert.equal((await replayRecordedRun(recorded, { to: 8 })).snapshotCheck.compared, false, 'stopped before the stored seq');
  });

  it('refuses a run recorded by another chart version unless forced', async () => {
    const recorded = recordedRun();
    assert.ok(recorded.snapshot);
    recorded.snapshot.machineVersion = SNAPSHOT_VERSION + 1;
    await assert.rejects(replayRecordedRun(recorded), (error: unknown) => {
      assert.ok(error instanceof ReplayVersionError);
      assert.match(error.message, new RegExp(`version ${SNAPSHOT_VERSION + 1}.*version ${SNAPSHOT_VERSION}.*force`));
      return true;
    });
    const forced = await replayRecordedRun(recorded, { force: true });
    assert.equal(forced.machine.forced, true);
    assert.equal(forced.divergence, null);
  });

  it('refuses a journal that does not start with run.created or has a gap', async () => {
    const recorded = recordedRun();
    recorded.journal.splice(3, 1);
    await assert.rejects(replayRecordedRun(recorded), ReplayJournalError);
    const headless = recordedRun();
    headless.journal[0] = { ...headless.journal[0]!, event: { type: 'run.cancel' } };
    await assert.rejects(replayRecordedRun(headless), /not run\.created/);
  });

  it('prints each step with its time, event, state change, intents and deadlines', async () => {
    const text = formatReport(await replayRecordedRun(recordedRun(), { to: 2 }));
    assert.match(text, /seq 1 {2}\S+Z {2}placement\.granted {2}jobKey=build agentId=agent-1/);
    assert.match(text, /job build {2}waiting\.agent → assigned\.dispatched|job build {2}queued → assigned\.dispatched/);
    assert.match(text, /intent {3}sendDispatch/);
    assert.match(text, /armed {4}build#ack \(ack\) due /);
    assert.match(text, /fired {4}build#ack/);
    assert.match(text, /result: exact/);
  });
});
