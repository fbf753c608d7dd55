import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { persistedOf } from '../../../actors/runs/run-actors.ts';
import { RunHarness, ack, fanout, jobPlan, need, status } from '../../support/machines.ts';

/** persistedOf against XState's own getPersistedSnapshot, as the JSON text the store writes (key order included). */
function assertSamePersisted(h: RunHarness, when: string): void {
  assert.equal(JSON.stringify(persistedOf(h.actor)), JSON.stringify(h.actor.getPersistedSnapshot()), when);
}

describe('persistedOf writes what XState persists, without its walk for actor references (actors/runs/run-actors.ts)', () => {
  it('through a run with needs, a fan-out that fails fast, a restore and its end', () => {
    let h = RunHarness.start([...fanout('shard', 3, { maxParallel: 2, failFast: true }), jobPlan('deploy', { needs: [need('shard')] }), jobPlan('lint')]);
    assertSamePersisted(h, 'created');
    const owner = h.dispatch('lint', 10);
    assertSamePersisted(h, 'granted');
    h.send({ ...ack(11, owner), jobKey: 'lint' });
    h.send({ ...status('running', 12, owner), jobKey: 'lint' });
    assertSamePersisted(h, 'running');
    h = h.restore();
    assertSamePersisted(h, 'restored');
    h.runToEnd('shard (0)', 'failed', 20);
    assertSamePersisted(h, 'a shard failed: its siblings skipped, deploy skipped');
    h.fromOwner('lint', (o) => status('success', 30, o));
    assertSamePersisted(h, 'ended');
    assert.equal(h.snapshot.status, 'done');
  });

  it('through a cancel and an expired deadline', () => {
    const h = RunHarness.start([jobPlan('build'), jobPlan('test', { needs: [need('build')] })]);
    h.dispatch('build', 10);
    h.expire('build', 'ack');
    assertSamePersisted(h, 'ack deadline expired');
    h.send({ type: 'run.cancel', reason: 'stop', force: true, by: 'alice', at: 100 });
    assertSamePersisted(h, 'cancelled');
  });
});
