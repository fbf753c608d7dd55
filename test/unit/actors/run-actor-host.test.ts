import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { IntentRecorder, runtimeRunMachine } from '../../../actors/runs/intent-recorder.ts';
import { RunActorHost } from '../../../actors/runs/run-actors.ts';
import { planFor, waitingWorkflow } from '../../support/runtime.ts';

const recorder = new IntentRecorder();
const machine = runtimeRunMachine(recorder.sink);

/** Runs `step` as the supervisor does: the intents it records belong to `runId`. */
function recording<T>(runId: string, step: () => T): T {
  recorder.begin(runId);
  try {
    return step();
  } finally {
    recorder.end();
  }
}

describe('run actors of one supervisor (public XState API only)', () => {
  it('stop() stops a run actor, its jobs with it, and tells the watch', () => {
    const stopped: string[] = [];
    const host = new RunActorHost({ restored: () => {}, stopped: (runId) => stopped.push(runId) });
    const actor = recording('r1', () => host.create(machine, planFor('r1', waitingWorkflow('w', { jobs: ['build', 'test'] })), 'r1').start());
    const jobs = Object.values(actor.getSnapshot().children);
    assert.equal(jobs.length, 2);
    host.stop(actor);
    assert.equal(actor.getSnapshot().status, 'stopped');
    assert.ok(jobs.every((job) => job?.getSnapshot().status === 'stopped'));
    assert.deepEqual(stopped, ['r1']);
  });

  it('a restored actor starts where its persisted snapshot was, and the watch hears of it', () => {
    const restoredIds: string[] = [];
    const host = new RunActorHost({ restored: (runId) => restoredIds.push(runId), stopped: () => {} });
    const first = recording('r1', () => host.create(machine, planFor('r1', waitingWorkflow('w')), 'r1').start());
    const restored = recording('r1', () => host.restore(machine, first.getPersistedSnapshot(), 'r1').start());
    assert.deepEqual(restored.getPersistedSnapshot(), first.getPersistedSnapshot());
    assert.deepEqual(restoredIds, ['r1']);
    for (const actor of [first, restored]) host.stop(actor);
  });

  it('runs that finish leave the shared parent working: the next run starts and finishes as the first did', () => {
    const host = new RunActorHost();
    for (const runId of ['r1', 'r2', 'r3']) {
      const actor = recording(runId, () => host.create(machine, planFor(runId, waitingWorkflow('w')), runId).start());
      recording(runId, () => actor.send({ type: 'run.cancel', reason: 'test', force: true, by: 'test', at: Date.now() }));
      assert.equal(actor.getSnapshot().status, 'done', `${runId} finished`);
    }
  });

  it('a run actor that crashes reports to its own error observer, and the host’s next run is unaffected', () => {
    const host = new RunActorHost();
    const errors: unknown[] = [];
    const crashing = host.create(machine, planFor('r1', waitingWorkflow('w')), 'r1');
    crashing.subscribe({ error: (error) => errors.push(error) });
    crashing.start(); // outside its recording: its first intent throws, as a bug in an action would
    assert.equal(crashing.getSnapshot().status, 'error');
    assert.equal(errors.length, 1);
    const next = recording('r2', () => host.create(machine, planFor('r2', waitingWorkflow('w')), 'r2').start());
    assert.equal(next.getSnapshot().status, 'active');
    host.stop(next);
  });
});
