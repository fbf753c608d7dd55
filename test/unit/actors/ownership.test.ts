import assert from 'node:assert/strict';
import { it } from 'node:test';
import { pino } from 'pino';
import { Registry } from 'prom-client';
import { TransientStoreError } from '../../../actors/runs/errors.ts';
import { createRuntimeMetrics } from '../../../actors/runs/metrics.ts';
import { Ownership, type OwnershipOptions, type OwnershipStore, type PeerLeases } from '../../../actors/runs/ownership.ts';
import type { Supervisor } from '../../../actors/runs/supervisor.ts';
import { ManualClock } from '../../support/manual-clock.ts';

const RENEW_MS = 200;
const TTL_MS = 1_000;

/**
 * The coordinators table as the store reads it: a peer's lease ends when `now` passes `leaseUntil`;
 * one that names a liveness lock renewed last at `renewedAt`, and is dead once that renewal is
 * `overdueMs` old and its lock is free (`lockFree`: its process is gone).
 */
interface Peer {
  epoch: number;
  leaseUntil: number;
  runs: string[];
  renewedAt?: number;
  lockFree?: boolean;
}

class Leases implements OwnershipStore {
  readonly peers = new Map<string, Peer>();
  readonly claims: { livenessKey: number | null }[] = [];
  readonly adoptions: { deadId: string; at: number }[] = [];
  /** The live runs moved to me, as the database has them. */
  readonly mine: string[] = [];
  peerScans = 0;

  claimLease = ({ livenessKey }: { livenessKey: number | null }) => {
    this.claims.push({ livenessKey });
    return Promise.resolve({ epoch: 1 });
  };
  renewLease = () => Promise.resolve(true);
  releaseLease = () => Promise.resolve(true);
  reclaimOwnRuns = () => Promise.resolve([]);
  loadRuns = (runIds: string[]) => Promise.resolve(runIds.map((runId) => ({ runId }) as never));

  peerLeases({ now, overdueMs }: { now: number; overdueMs: number }): Promise<PeerLeases> {
    this.peerScans += 1;
    // Those with live runs, and those naming a liveness lock whose lease runs (gone, they are dead whatever they own).
    const watched = (peer: Peer) => peer.runs.length > 0 || (peer.renewedAt !== undefined && peer.leaseUntil >= now);
    const live = [...this.peers].filter(([, peer]) => watched(peer)).sort((a, b) => a[1].leaseUntil - b[1].leaseUntil);
    const expired = live.flatMap(([id, peer]): PeerLeases['expired'] => {
      if (peer.leaseUntil < now) return [{ id, epoch: peer.epoch, why: 'lease' as const }];
      return processGone(peer, now, overdueMs) ? [{ id, epoch: peer.epoch, why: 'process' as const }] : [];
    });
    const alive = live.filter(([, peer]) => peer.leaseUntil >= now && !processGone(peer, now, overdueMs)).map(([, peer]) => peer);
    const overdueAt = alive.flatMap((peer) => (peer.renewedAt !== undefined && peer.renewedAt + overdueMs >= now ? [peer.renewedAt + overdueMs] : []));
    const nextEnd = alive.find((peer) => peer.runs.length > 0)?.leaseUntil ?? null;
    return Promise.resolve({ expired, nextEnd, nextOverdue: overdueAt.length > 0 ? Math.min(...overdueAt) : null });
  }

  adoptRunsOf({ deadId, now, overdueMs }: { deadId: string; now: number; overdueMs: number }): Promise<string[]> {
    const dead = this.peers.get(deadId);
    if (!dead || (dead.leaseUntil >= now && !processGone(dead, now, overdueMs))) return Promise.resolve([]);
    this.adoptions.push({ deadId, at: now });
    dead.leaseUntil = Math.min(dead.leaseUntil, now - 1);
    const runs = dead.runs;
    dead.runs = [];
    this.mine.push(...runs);
    return Promise.resolve(runs);
  }

  ownedLiveRuns = () => Promise.resolve([...this.mine]);
}

function processGone(peer: Peer, now: number, overdueMs: number): boolean {
  return peer.lockFree === true && peer.renewedAt !== undefined && peer.renewedAt < now - overdueMs;
}

/** `restores` gets the run ids of each restore the supervisor is asked for. */
function ownershipOver(
  store: Leases,
  clock: ManualClock,
  registry = new Registry(),
  restores: string[][] = [],
  takeLiveness?: OwnershipOptions['takeLiveness'],
): Ownership {
  const supervisor = {
    restore: (rows: { runId: string }[]) => {
      restores.push(rows.map((row) => row.runId));
      return { restored: rows.map((row) => row.runId), refused: [] };
    },
    owns: (runId: string) => restores.flat().includes(runId),
    armDeferredTimers: () => undefined,
  } as unknown as Supervisor;
  return new Ownership(supervisor, {
    coordinatorId: 'me',
    renewMs: RENEW_MS,
    ttlMs: TTL_MS,
    store,
    clock,
    log: pino({ level: 'silent' }),
    metrics: createRuntimeMetrics(registry),
    onAdopted: () => Promise.resolve(),
    onFenced: () => undefined,
    ...(takeLiveness && { takeLiveness }),
  });
}

it('a peer whose process is gone is adopted the moment its renewals are 1.5 intervals late, not at its lease end nor at the tick after; the liveness lock is taken before the claim and let go at stop', async () => {
  const clock = new ManualClock();
  const store = new Leases();
  // Renewed at 0, killed at once: its lease would end at 1,000; its lock is free, and its renewals are late after 300.
  store.peers.set('peer', { epoch: 3, leaseUntil: TTL_MS, runs: ['run-1'], renewedAt: 0, lockFree: true });
  const liveness = { key: 77, closed: 0, close: () => Promise.resolve(void (liveness.closed += 1)) };
  const ownership = ownershipOver(store, clock, new Registry(), [], () => Promise.resolve(liveness));
  try {
    await ownership.start();
    assert.deepEqual(store.claims, [{ livenessKey: 77 }], 'the claim writes the key of the lock taken first');
    await clock.advance(1.5 * RENEW_MS);
    assert.deepEqual(store.adoptions, [], 'at 300 its renewals are not yet overdue');
    await clock.advance(1);
    assert.deepEqual(store.adoptions, [{ deadId: 'peer', at: 1.5 * RENEW_MS + 1 }], 'just after, between my ticks at 200 and 400');
  } finally {
    await ownership.stop();
  }
  assert.equal(liveness.closed, 1);
});

it('a frozen peer (renewals late, its lock held) waits for its lease end, with no scan between the ticks; a live one costs one scan per renewal at most', async () => {
  const clock = new ManualClock();
  const store = new Leases();
  const frozen: Peer = { epoch: 2, leaseUntil: TTL_MS, runs: ['run-1'], renewedAt: 0 };
  const renewing: Peer = { epoch: 5, leaseUntil: TTL_MS, runs: ['run-2'], renewedAt: 0 };
  store.peers.set('frozen', frozen);
  store.peers.set('renewing', renewing);
  const ownership = ownershipOver(store, clock);
  try {
    await ownership.start();
    for (let at = 50; at <= TTL_MS; at += 50) {
      await clock.advance(50);
      if (at % RENEW_MS === 0) Object.assign(renewing, { renewedAt: at, leaseUntil: at + TTL_MS });
    }
    assert.deepEqual(store.adoptions, [], 'late and alive is not dead');
    const scans = store.peerScans;
    assert.ok(scans <= 1 + 2 * (TTL_MS / RENEW_MS), `a scan per tick and one per renewal watched at most: ${scans}`);
    await clock.advance(1);
    assert.deepEqual(store.adoptions, [{ deadId: 'frozen', at: TTL_MS + 1 }], 'the frozen one at its lease end');
  } finally {
    await ownership.stop();
  }
});

it('a peer gone with no live run has its lease ended at once (its agent sessions die with it), once; one that renews is left alone', async () => {
  const clock = new ManualClock();
  const store = new Leases();
  const registry = new Registry();
  store.peers.set('agents-only', { epoch: 4, leaseUntil: TTL_MS, runs: [], renewedAt: 0, lockFree: true });
  store.peers.set('idle', { epoch: 1, leaseUntil: TTL_MS, runs: [], renewedAt: 0 });
  const restores: string[][] = [];
  const ownership = ownershipOver(store, clock, registry, restores);
  try {
    await ownership.start();
    await clock.advance(1.5 * RENEW_MS + 1);
    assert.deepEqual(store.adoptions, [{ deadId: 'agents-only', at: 1.5 * RENEW_MS + 1 }]);
    assert.equal(store.peers.get('agents-only')?.leaseUntil, 1.5 * RENEW_MS, 'its lease ended');
    await clock.advance(TTL_MS);
    assert.deepEqual(store.adoptions.map((a) => a.deadId), ['agents-only'], 'once; the idle peer, its lock held, is not dead');
    assert.deepEqual(restores, [], 'nothing to restore');
    const takeovers = await registry.getSingleMetric('switchyard_lease_takeovers_total')?.get();
    assert.deepEqual(takeovers?.values.map((v) => [v.labels, v.value]), [[{ why: 'process' }, 1]]);
  } finally {
    await ownership.stop();
  }
});

it('a liveness lock that cannot be taken leaves the lease claimed without one', async () => {
  const store = new Leases();
  const ownership = ownershipOver(store, new ManualClock(), new Registry(), [], () => Promise.reject(new Error('no connection')));
  try {
    await ownership.start();
    assert.deepEqual(store.claims, [{ livenessKey: null }]);
  } finally {
    await ownership.stop();
  }
});

it('adopts a dead peer the moment its lease ends, not at the renewal tick after', async () => {
  const clock = new ManualClock();
  const store = new Leases();
  // The peer renewed at 50 and was killed right after: its lease ends at 1,050, between two of my ticks (1,000 and 1,200).
  store.peers.set('peer', { epoch: 3, leaseUntil: 50 + TTL_MS, runs: ['run-1', 'run-2'] });
  const registry = new Registry();
  const ownership = ownershipOver(store, clock, registry);
  try {
    await ownership.start();
    await clock.advance(1_050);
    assert.deepEqual(store.adoptions, [], 'not before the lease has ended');
    await clock.advance(1);
    assert.deepEqual(store.adoptions, [{ deadId: 'peer', at: 1_051 }]);
    const adoptions = await registry.getSingleMetric('switchyard_adoption_seconds')?.get();
    const count = adoptions?.values.find((v) => (v as { metricName?: string }).metricName === 'switchyard_adoption_seconds_count');
    assert.deepEqual([count?.labels, count?.value], [{ cause: 'takeover' }, 1], 'the takeover is timed');
  } finally {
    await ownership.stop();
  }
});

it('a peer that keeps renewing is never adopted, and only one lease-end scan waits at a time', async () => {
  const clock = new ManualClock();
  const store = new Leases();
  const peer = { epoch: 3, leaseUntil: TTL_MS, runs: ['run-1'] };
  store.peers.set('peer', peer);
  const ownership = ownershipOver(store, clock);
  try {
    await ownership.start();
    for (let at = 0; at < 10_000; at += 100) {
      peer.leaseUntil = clock.now() + TTL_MS;
      await clock.advance(100);
      assert.ok(clock.timers <= 2, `the renewal tick and one lease-end scan at most; ${clock.timers} timers armed at ${clock.now()}`);
    }
    assert.deepEqual(store.adoptions, []);
    assert.ok(store.peerScans <= 10_000 / RENEW_MS + 1, `one peer scan per tick, no more: ${store.peerScans}`);
  } finally {
    await ownership.stop();
  }
  assert.equal(clock.timers, 0, 'stopping clears the lease-end scan');
});

it("a peer lease that ends far ahead (its clock ahead of mine) is left to the ticks' scans", async () => {
  const clock = new ManualClock();
  const store = new Leases();
  store.peers.set('skewed', { epoch: 1, leaseUntil: 30 * 86_400_000, runs: ['run-1'] });
  const ownership = ownershipOver(store, clock);
  try {
    await ownership.start();
    assert.equal(clock.timers, 1, 'the renewal tick alone');
    await clock.advance(1_000);
    assert.equal(store.peerScans, 1 + 1_000 / RENEW_MS, 'one peer scan at start, then one per tick');
  } finally {
    await ownership.stop();
  }
});

/** The error a read cut off by Postgres (an admin shutdown of its backend) is classified as. */
function connectionCut(): TransientStoreError {
  return new TransientStoreError('57P01', new Error('terminating connection due to administrator command'));
}

it('runs moved here whose read is cut off are held, with their inbox, and restored at the next scan', async () => {
  const clock = new ManualClock();
  const store = new Leases();
  store.peers.set('peer', { epoch: 3, leaseUntil: -1, runs: ['run-1', 'run-2'] });
  let cuts = 1;
  store.loadRuns = (runIds) => (cuts-- > 0 ? Promise.reject(connectionCut()) : Promise.resolve(runIds.map((runId) => ({ runId }) as never)));
  const restores: string[][] = [];
  const ownership = ownershipOver(store, clock, new Registry(), restores);
  try {
    await ownership.start();
    assert.deepEqual(store.adoptions, [{ deadId: 'peer', at: 0 }], 'the runs moved here at the first scan');
    assert.deepEqual(restores, [], 'their read was cut off');
    assert.equal(ownership.adopting, true, 'the inbox waits: events of runs with no actor would be dropped');
    await clock.advance(RENEW_MS);
    assert.deepEqual(restores, [['run-1', 'run-2']], 'the next scan reads and restores them');
    assert.equal(ownership.adopting, false);
  } finally {
    await ownership.stop();
  }
});

it('a first scan cut off does not stop the start: the next tick scans again', async () => {
  const clock = new ManualClock();
  const store = new Leases();
  store.peers.set('peer', { epoch: 3, leaseUntil: -1, runs: ['run-1'] });
  const scan = store.peerLeases.bind(store);
  let cuts = 1;
  store.peerLeases = (args) => (cuts-- > 0 ? Promise.reject(connectionCut()) : scan(args));
  const ownership = ownershipOver(store, clock);
  try {
    await ownership.start();
    assert.deepEqual(store.adoptions, []);
    await clock.advance(RENEW_MS);
    assert.deepEqual(store.adoptions, [{ deadId: 'peer', at: RENEW_MS }]);
  } finally {
    await ownership.stop();
  }
});

it('runs moved by an adoption whose answer was lost are found owned here with no actor, and restored at the next scan', async () => {
  const clock = new ManualClock();
  const store = new Leases();
  store.peers.set('peer', { epoch: 3, leaseUntil: -1, runs: ['run-1', 'run-2'] });
  store.peers.set('other', { epoch: 1, leaseUntil: -1, runs: ['run-3'] });
  const move = store.adoptRunsOf.bind(store);
  // The move of peer's runs commits, and its answer is cut off on the way back.
  store.adoptRunsOf = async (args) => {
    const moved = await move(args);
    if (args.deadId === 'peer') throw connectionCut();
    return moved;
  };
  const restores: string[][] = [];
  const ownership = ownershipOver(store, clock, new Registry(), restores);
  try {
    await ownership.start();
    assert.deepEqual(store.mine, ['run-1', 'run-2'], 'moved, unseen');
    assert.deepEqual(restores, [], 'no actor for them yet; the scan stopped there');
    await clock.advance(RENEW_MS);
    assert.deepEqual(restores, [['run-1', 'run-2'], ['run-3']], 'the next scan finds the stranded runs first, then adopts as usual');
    await clock.advance(RENEW_MS);
    assert.equal(restores.length, 2, 'found once: the runs restored since are not restored again');
  } finally {
    await ownership.stop();
  }
});
