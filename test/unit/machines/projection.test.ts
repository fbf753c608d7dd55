import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { projectRun } from '../../../machines/projection.ts';
import type { PersistedMachineSnapshot } from '../../../machines/projection.ts';
import type { RunContext } from '../../../machines/run.machine.ts';
import { storedState } from '../../../actors/runs/commit-entry.ts';
import { deferredState } from '../../../actors/runs/run-actors.ts';
import { RunHarness, ack, jobPlan, need, status, stepStatus } from '../../support/machines.ts';

describe('projectRun', () => {
  it('gives the same row from the live snapshot (its tags) as from the stored one (resolved against the chart)', () => {
    const h = RunHarness.start([jobPlan('build'), jobPlan('test')]);
    const stored = () => JSON.parse(JSON.stringify(h.actor.getPersistedSnapshot())) as PersistedMachineSnapshot<RunContext>;
    assert.deepEqual(projectRun(h.snapshot), projectRun(stored()));
    h.dispatch('build', 2_000);
    assert.deepEqual(projectRun(h.snapshot), projectRun(stored()));
    h.send({ type: 'run.cancel', reason: 'test', force: true, by: 'test', at: 3_000 });
    assert.equal(projectRun(h.snapshot).status, projectRun(stored()).status);
    assert.notEqual(projectRun(h.snapshot).status, 'pending');
  });
});

describe('the state of an entry that defers its snapshot', () => {
  it('projects the same run row, job rows and summary from the live actor as from its persisted snapshot', () => {
    const h = RunHarness.start([jobPlan('build'), jobPlan('test', { needs: [need('build')] }), jobPlan('lint')]);
    const json = (value: unknown) => JSON.parse(JSON.stringify(value)) as unknown;
    const same = (when: string) => {
      const { snapshot, ...live } = deferredState(h.actor);
      const { snapshot: stored, ...fromStored } = storedState(JSON.parse(JSON.stringify(h.actor.getPersistedSnapshot())) as PersistedMachineSnapshot<RunContext>);
      assert.equal(snapshot, null);
      assert.ok(stored);
      assert.deepEqual(json(live), json(fromStored), when);
    };
    same('created');
    h.dispatch('build', 2_000);
    same('dispatched');
    h.fromOwner('build', (o) => ack(2_001, o));
    h.fromOwner('build', (o) => status('running', 2_002, o));
    h.fromOwner('build', (o) => stepStatus(2_003, o));
    same('running a step');
    h.fromOwner('build', (o) => status('failed', 2_004, o, 'exit 1'));
    same('a job failed, its dependant skipped');
    h.send({ type: 'run.cancel', reason: 'test', force: true, by: 'test', at: 3_000 });
    same('cancelled');
  });

  it('leaves out a job whose actor still has the snapshot its written row was read from', () => {
    const h = RunHarness.start([jobPlan('build'), jobPlan('lint')]);
    const actorSnapshots = () => new Map(Object.entries(h.actor.getSnapshot().children).map(([jobKey, child]) => [jobKey, { digest: '', from: child?.getSnapshot() }]));
    assert.deepEqual(deferredState(h.actor, actorSnapshots()).jobs, [], 'nothing moved since the rows were written');
    const written = actorSnapshots();
    h.dispatch('build', 2_000);
    const changed = deferredState(h.actor, written).jobs;
    assert.deepEqual(changed.map((job) => job.jobKey), ['build']);
    assert.deepEqual(changed[0], deferredState(h.actor).jobs.find((job) => job.jobKey === 'build'), 'the changed job is projected in full');
  });
});
