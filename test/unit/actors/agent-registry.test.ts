import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { AgentRegistry, LATE_MESSAGE_GRACE_MS } from '../../../actors/agents/registry.ts';

function registryAt(clock: { now: number }): AgentRegistry {
  return new AgentRegistry(() => clock.now);
}

const holder = (jobKey: string) => ({ runId: 'run-1', jobKey });

describe('agent registry: ended attempts are kept through the late-message grace, then swept', () => {
  it('an attempt is kept for the grace after its slot was freed, and swept after it, in the order attempts ended', () => {
    const clock = { now: 0 };
    const registry = registryAt(clock);
    registry.reserve('agent-1', 'd1', holder('a'));
    registry.reserve('agent-1', 'd2', holder('b'));
    registry.release('agent-1', 'd1');
    clock.now = 10_000;
    registry.release('agent-1', 'd2');
    clock.now = LATE_MESSAGE_GRACE_MS - 1;
    registry.release('agent-1', 'none');
    assert.deepEqual([registry.dispatchOf('d1')?.endedAt, registry.dispatchOf('d2')?.endedAt], [0, 10_000], 'both in their grace');
    clock.now = LATE_MESSAGE_GRACE_MS + 1_000;
    registry.release('agent-1', 'none');
    assert.equal(registry.dispatchOf('d1'), undefined, 'past its grace');
    assert.equal(registry.dispatchOf('d2')?.endedAt, 10_000, 'still in its grace');
    clock.now = 10_000 + LATE_MESSAGE_GRACE_MS + 1_000;
    registry.release('agent-1', 'none');
    assert.equal(registry.dispatchOf('d2'), undefined);
  });

  it('a dispatch id reserved again after it ended keeps its new record when the old end is swept', () => {
    const clock = { now: 0 };
    const registry = registryAt(clock);
    registry.reserve('agent-1', 'd1', holder('a'));
    registry.release('agent-1', 'd1');
    clock.now = 5_000;
    registry.reserve('agent-2', 'd1', holder('a'));
    clock.now = LATE_MESSAGE_GRACE_MS + 2_000;
    registry.release('agent-2', 'none');
    assert.deepEqual([registry.dispatchOf('d1')?.agentId, registry.dispatchOf('d1')?.endedAt], ['agent-2', null]);
  });

  it('an attempt remembered as ended (after a restart) is swept too', () => {
    const clock = { now: 100_000 };
    const registry = registryAt(clock);
    registry.rememberDispatch('d9', { ...holder('a'), agentId: 'agent-1', endedAt: 90_000 });
    registry.rememberDispatch('d10', { ...holder('b'), agentId: 'agent-1', endedAt: null });
    clock.now = 90_000 + LATE_MESSAGE_GRACE_MS + 1_000;
    registry.release('agent-1', 'none');
    assert.equal(registry.dispatchOf('d9'), undefined);
    assert.equal(registry.dispatchOf('d10')?.endedAt, null, 'an open attempt is never swept');
  });
});
