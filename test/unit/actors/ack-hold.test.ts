import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { pino } from 'pino';
import { ackExpiryHold } from '../../../actors/agents/ack-hold.ts';
import type { ArmedTimer } from '../../../actors/runs/timer-service.ts';

const NOW = 100_000;
const TTL = 1_500;
const RENEW = 250;

function hold(agent: { id: string | null; local: boolean }, lease: { leaseUntil: number } | null | 'error') {
  return ackExpiryHold({
    agentOf: () => agent.id,
    isLocal: () => agent.local,
    holderLease: () => (lease === 'error' ? Promise.reject(new Error('database down')) : Promise.resolve(lease && { coordinatorId: 'coord-a', ...lease })),
    now: () => NOW,
    leaseTtlMs: TTL,
    leaseRenewMs: RENEW,
    log: pino({ level: 'silent' }),
  });
}

const ack: ArmedTimer = { runId: 'r', deadlineId: 'd', kind: 'ack', jobKey: 'build', dueAt: NOW };

describe("an ack deadline whose agent is reached through a peer that stopped renewing waits for the peer's lease to settle", () => {
  it('is delivered at once for another kind, a local agent, or no agent', () => {
    assert.equal(hold({ id: 'a', local: false }, { leaseUntil: NOW })({ ...ack, kind: 'recovery' }, 0), null);
    assert.equal(hold({ id: 'a', local: true }, { leaseUntil: NOW })(ack, 0), null);
    assert.equal(hold({ id: null, local: false }, { leaseUntil: NOW })(ack, 0), null);
  });

  it('is delivered when the peer renews its lease (the ack is really missing) or no session of the agent is left', async () => {
    assert.equal(await hold({ id: 'a', local: false }, { leaseUntil: NOW + TTL - RENEW })(ack, 0), null);
    assert.equal(await hold({ id: 'a', local: false }, null)(ack, 0), null);
  });

  it('is held, asking again each renew interval, while the peer misses renewals; at most three lease lifetimes', async () => {
    const frozen = hold({ id: 'a', local: false }, { leaseUntil: NOW + 200 });
    assert.equal(await frozen(ack, 0), RENEW);
    assert.equal(await frozen(ack, 3 * TTL), RENEW);
    assert.equal(frozen(ack, 3 * TTL + 1), null);
  });

  it("once held, waits one interval more when the peer's sessions are cleared, so the disconnect reaches the job first", async () => {
    let lease: { leaseUntil: number } | null = { leaseUntil: NOW + 200 };
    const settling = ackExpiryHold({
      ...{ agentOf: () => 'a', isLocal: () => false, now: () => NOW, leaseTtlMs: TTL, leaseRenewMs: RENEW, log: pino({ level: 'silent' }) },
      holderLease: () => Promise.resolve(lease && { coordinatorId: 'coord-a', ...lease }),
    });
    assert.equal(await settling(ack, 0), RENEW);
    lease = null;
    assert.equal(await settling(ack, RENEW), RENEW);
    assert.equal(await settling(ack, 2 * RENEW), null);
  });

  it('is delivered when the peer cannot be asked', async () => {
    assert.equal(await hold({ id: 'a', local: false }, 'error')(ack, 0), null);
  });
});
