import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { pino } from 'pino';
import { ackExpiryHold } from '../../../actors/agents/ack-hold.ts';
import type { ArmedTimer } from '../../../actors/runs/timer-service.ts';

const NOW = 100_000;
const TTL = 1_500;
const RENEW = 250;

const ack: ArmedTimer = { runId: 'r', deadlineId: 'd', kind: 'ack', jobKey: 'build', dueAt: NOW };

/** What the hold sees, changed by each test between asks; `lost` records the disconnects it sent. */
interface World {
  agent: string | null;
  local: boolean;
  armed: { id: string; at: number } | undefined;
  lease: { leaseUntil: number } | null | 'error';
  now: number;
  lost: string[];
}

function world(lease: World['lease']): World {
  return { agent: 'agent-b', local: false, armed: { id: ack.deadlineId, at: ack.dueAt }, lease, now: NOW, lost: [] };
}

function holdIn(w: World) {
  return ackExpiryHold({
    agentOf: () => w.agent,
    isLocal: () => w.local,
    ackDeadlineOf: () => w.armed,
    holderLease: () => (w.lease === 'error' ? Promise.reject(new Error('database down')) : Promise.resolve(w.lease && { coordinatorId: 'coord-b', ...w.lease })),
    agentLost: (runId, jobKey, agentId, cause) => {
      w.lost.push(`${runId}/${jobKey}/${agentId} (${cause})`);
      return Promise.resolve();
    },
    now: () => w.now,
    leaseTtlMs: TTL,
    leaseRenewMs: RENEW,
    log: pino({ level: 'silent' }),
  });
}

/** A peer that last renewed `agoMs` before `now`. */
const renewedAgo = (agoMs: number, now = NOW) => ({ leaseUntil: now - agoMs + TTL });

describe("an ack deadline whose agent is reached through a peer that stopped renewing waits for the peer's lease to settle", () => {
  it('is delivered at once for another kind, a local agent, no agent, or a deadline no longer armed (the ack came)', () => {
    const frozen = () => world(renewedAgo(TTL - 100));
    assert.equal(holdIn(frozen())({ ...ack, kind: 'recovery' }, 0), null);
    assert.equal(holdIn({ ...frozen(), local: true })(ack, 0), null);
    assert.equal(holdIn({ ...frozen(), agent: null })(ack, 0), null);
    assert.equal(holdIn({ ...frozen(), armed: undefined })(ack, 0), null);
    assert.equal(holdIn({ ...frozen(), armed: { id: ack.deadlineId, at: NOW + 5_000 } })(ack, 0), null, 'a re-armed deadline is another one');
  });

  it('is delivered once the peer renews its lease after the deadline: the ack is really missing', async () => {
    const w = world(renewedAgo(RENEW));
    const hold = holdIn(w);
    assert.equal(await hold(ack, 0), RENEW, 'renewing, but last renewed before the deadline: asked again after its next renewal');
    w.now += RENEW;
    w.lease = renewedAgo(0, w.now);
    assert.equal(await hold(ack, RENEW), null);
    assert.deepEqual(w.lost, []);
  });

  it('B7: a peer killed just before the deadline looks renewing, but never renews again → the job is told its agent went with the coordinator, never requeued', async () => {
    const w = world(renewedAgo(RENEW));
    const hold = holdIn(w);
    assert.equal(await hold(ack, 0), RENEW);
    for (let asked = RENEW; w.lost.length === 0 && asked < 3 * TTL; asked += RENEW) {
      w.now += RENEW;
      const again = await hold(ack, asked);
      // Null (deliver) only once the job has been told: the expiry then finds no ack deadline armed.
      if (w.lost.length === 0) assert.notEqual(again, null, `not delivered ${asked} ms after the deadline, the peer not having renewed`);
    }
    assert.deepEqual(w.lost, ['r/build/agent-b (coordinator)']);
  });

  it('B7: no socket of the agent on any coordinator → the job is told its agent disconnected before the expiry, which would requeue it while the agent may run it', async () => {
    const w = world(null);
    assert.equal(await holdIn(w)(ack, 0), null);
    assert.deepEqual(w.lost, ['r/build/agent-b (agent)'], 'a plain disconnect: a scaler agent’s job is requeued, a static agent’s waits for its reclaim');
  });

  it('is held, asking again each renew interval, while the peer misses renewals', async () => {
    const w = world(renewedAgo(3 * RENEW));
    const hold = holdIn(w);
    assert.equal(await hold(ack, 0), RENEW);
    w.now += RENEW;
    assert.equal(await hold(ack, RENEW), RENEW);
    assert.deepEqual(w.lost, []);
  });

  it('B7: the peer’s lease runs out while held → the job is told its agent went with the coordinator, and is never requeued by the expiry', async () => {
    const w = world(renewedAgo(3 * RENEW));
    const hold = holdIn(w);
    assert.equal(await hold(ack, 0), RENEW);
    w.now = w.lease !== null && w.lease !== 'error' ? w.lease.leaseUntil : NOW;
    assert.equal(await hold(ack, RENEW), null);
    assert.deepEqual(w.lost, ['r/build/agent-b (coordinator)'], 'agent.disconnected goes before the expiry, which then finds no ack deadline armed');
  });

  it('B7: held, then the peer’s sessions are cleared by a peer’s poll → the job is told its agent is lost', async () => {
    const w = world(renewedAgo(3 * RENEW));
    const hold = holdIn(w);
    assert.equal(await hold(ack, 0), RENEW);
    w.lease = null;
    assert.equal(await hold(ack, RENEW), null);
    assert.deepEqual(w.lost, ['r/build/agent-b (coordinator)']);
  });

  it('B7: when telling the job its agent is lost fails, the deadline stays held and is asked about again, never delivered', async () => {
    const w = world(renewedAgo(3 * RENEW));
    const failing = ackExpiryHold({
      ...{ agentOf: () => w.agent, isLocal: () => false, ackDeadlineOf: () => w.armed, now: () => w.now, leaseTtlMs: TTL, leaseRenewMs: RENEW, log: pino({ level: 'silent' }) },
      holderLease: () => Promise.resolve(w.lease === 'error' ? null : w.lease && { coordinatorId: 'coord-b', ...w.lease }),
      agentLost: () => Promise.reject(new Error('commit failed')),
    });
    assert.equal(await failing(ack, 0), RENEW);
    w.lease = null;
    assert.equal(await failing(ack, RENEW), RENEW);
    assert.equal(await failing(ack, 2 * RENEW), RENEW, 'still held: the next ask tries again');
  });

  it('B7: a frozen peer that comes back gets two renew intervals to pass on the ack it held before the expiry is delivered', async () => {
    const w = world(renewedAgo(3 * RENEW));
    const hold = holdIn(w);
    assert.equal(await hold(ack, 0), RENEW);
    w.now += RENEW;
    w.lease = renewedAgo(0, w.now);
    assert.equal(await hold(ack, RENEW), 2 * RENEW);
    w.now += 2 * RENEW;
    w.lease = renewedAgo(RENEW, w.now);
    assert.equal(await hold(ack, 3 * RENEW), null, 'still no ack after the peer caught up: it is really missing');
    assert.deepEqual(w.lost, []);
  });

  it('B7: a plain disconnect that cannot be told is tried again as a plain disconnect, never as the coordinator’s', async () => {
    const w = world(null);
    const causes: string[] = [];
    const hold = ackExpiryHold({
      ...{ agentOf: () => w.agent, isLocal: () => false, ackDeadlineOf: () => w.armed, now: () => w.now, leaseTtlMs: TTL, leaseRenewMs: RENEW, log: pino({ level: 'silent' }) },
      holderLease: () => Promise.resolve(null),
      agentLost: (_runId, _jobKey, _agentId, cause) => {
        causes.push(cause);
        return causes.length === 1 ? Promise.reject(new Error('commit failed')) : Promise.resolve();
      },
    });
    assert.equal(await hold(ack, 0), RENEW, 'held while telling fails');
    assert.equal(await hold(ack, RENEW), null);
    assert.deepEqual(causes, ['agent', 'agent']);
  });

  it('a peer that neither renews nor lapses is not waited for past three lease lifetimes', async () => {
    const hold = holdIn(world(renewedAgo(TTL - 100)));
    assert.equal(await hold(ack, 0), RENEW);
    assert.equal(await hold(ack, 3 * TTL), RENEW);
    assert.equal(await hold(ack, 3 * TTL + 1), null);
  });

  it('is delivered when the peer cannot be asked, unless the peer was already seen frozen: then it asks again', async () => {
    assert.equal(await holdIn(world('error'))(ack, 0), null);
    const w = world(renewedAgo(3 * RENEW));
    const hold = holdIn(w);
    assert.equal(await hold(ack, 0), RENEW);
    w.lease = 'error';
    assert.equal(await hold(ack, RENEW), RENEW);
  });
});
