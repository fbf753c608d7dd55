import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ConnectionLimits, frameClassOf } from '../../../src/ws/rate-limit.ts';

const T0 = 1_000_000;

describe('agent socket rate limit (protocol.md §1): backpressure for kept frames, drops only for informational ones', () => {
  it('classifies frames: heartbeat exempt, informational and unknown droppable, everything else kept', () => {
    assert.equal(frameClassOf('heartbeat', true), 'exempt');
    for (const type of ['agent.status', 'agent.metrics', 'agent.log', 'run.event', 'job.context', 'config.ack']) assert.equal(frameClassOf(type, true), 'droppable', type);
    assert.equal(frameClassOf('x.custom', false), 'droppable');
    for (const type of ['job.ack', 'job.reject', 'job.status', 'step.status', 'job.heartbeat', 'log.chunk', 'agent.register', 'event.emit']) assert.equal(frameClassOf(type, true), 'kept', type);
  });

  it('a flood of settling frames is never dropped nor closed: past the burst each one pauses reading until the debt is paid', () => {
    const limits = new ConnectionLimits(T0);
    const verdicts = Array.from({ length: 1_000 }, () => limits.check('kept', 200, T0));
    assert.ok(verdicts.every((v) => v.kind === 'ok' || v.kind === 'pause'));
    assert.equal(verdicts.filter((v) => v.kind === 'ok').length, 200, 'the burst of 200 passes untouched');
    assert.deepEqual(verdicts.at(-1), { kind: 'pause', ms: 8_000 }, '800 frames of debt at 100/s');
    assert.deepEqual(limits.check('kept', 200, T0 + 60_000), { kind: 'ok' }, 'and it is paid back in time, with no close');
  });

  it('informational frames are dropped while settling frames hold the bucket, without a close however long it lasts', () => {
    const limits = new ConnectionLimits(T0);
    for (let i = 0; i < 200; i++) limits.check('kept', 100, T0);
    for (let s = 0; s < 20; s++) {
      const now = T0 + s * 1_000;
      for (let i = 0; i < 100; i++) limits.check('kept', 100, now);
      const verdict = limits.check('droppable', 100, now);
      assert.equal(verdict.kind, 'drop', `second ${s}`);
    }
  });

  it('informational frames that alone exceed the limit for over 5 s close the socket', () => {
    const limits = new ConnectionLimits(T0);
    const kinds: string[] = [];
    for (let ms = 0; ms <= 6_000; ms += 100) kinds.push(limits.check('droppable', 3 * 1024 * 1024, T0 + ms).kind);
    assert.ok(kinds.includes('drop'));
    assert.equal(kinds.at(-1), 'close');
  });

  it('one message over 4 MiB closes at once, settling or not; one over the 2 MiB byte burst is kept or dropped by its class', () => {
    const MiB = 1024 * 1024;
    assert.equal(new ConnectionLimits(T0).check('kept', 4 * MiB + 1, T0).kind, 'close');
    assert.deepEqual(new ConnectionLimits(T0).check('kept', 3 * MiB, T0), { kind: 'pause', ms: 2_048 });
    const dropped = new ConnectionLimits(T0).check('droppable', 3 * MiB, T0);
    assert.equal(dropped.kind, 'drop');
  });
});
