import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { projectRun } from '../../../machines/projection.ts';
import type { PersistedMachineSnapshot } from '../../../machines/projection.ts';
import type { RunContext } from '../../../machines/run.machine.ts';
import { RunHarness, jobPlan } from '../../support/machines.ts';

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
