import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { pino } from 'pino';
import { GroupCommitter } from '../../../actors/runs/group-commit.ts';
import type { SerializedEntry } from '../../../actors/runs/ports.ts';
import { systemClock } from '../../../actors/clock.ts';

const entry = (runId: string) => ({ runId }) as unknown as SerializedEntry;

/** A committer over a database whose commits finish when the test says. */
function setup() {
  const order: string[] = [];
  const inFlight: { runs: string[]; finish: () => void }[] = [];
  const committer = new GroupCommitter({
    commit: (entries) =>
      new Promise<void>((resolve) => {
        const runs = entries.map((e) => e.runId);
        order.push(`commit ${runs.join(',')}`);
        inFlight.push({ runs, finish: resolve });
      }),
    failRuns: () => Promise.resolve(),
    ...{ maxBatch: 64, batching: true, clock: systemClock, log: pino({ level: 'silent' }) },
    onFenced: () => undefined,
    onGiveUp: () => undefined,
  });
  const submit = (runId: string) => committer.submit(entry(runId)).then(() => void order.push(`durable ${runId}`));
  return { order, inFlight, submit };
}

const tick = () => new Promise((resolve) => setImmediate(resolve));

describe('group commit', () => {
  it('sends the next batch before the waiters of the one just committed run, so the database and this thread work at once', async () => {
    const { order, inFlight, submit } = setup();
    const first = submit('r1');
    await tick();
    const later = [submit('r2'), submit('r3')];
    inFlight[0]?.finish();
    await first;
    assert.deepEqual(order, ['commit r1', 'commit r2,r3', 'durable r1']);
    inFlight[1]?.finish();
    await Promise.all(later);
    assert.deepEqual(order.slice(3), ['durable r2', 'durable r3']);
  });

  it('keeps one batch in flight: entries that arrive meanwhile wait for it and go together', async () => {
    const { order, inFlight, submit } = setup();
    void submit('r1');
    await tick();
    void submit('r2');
    void submit('r3');
    await tick();
    assert.deepEqual(order, ['commit r1']);
    inFlight[0]?.finish();
    for (let i = 0; i < 10 && inFlight.length < 2; i++) await tick();
    assert.deepEqual(order.filter((line) => line.startsWith('commit')), ['commit r1', 'commit r2,r3']);
  });
});
