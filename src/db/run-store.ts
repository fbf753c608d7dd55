import type { Kysely } from 'kysely';
import type { OwnershipStore } from '../../actors/runs/ownership.ts';
import type { RunStore } from '../../actors/runs/ports.ts';
import type { Clock } from '../../actors/clock.ts';
import { adoptRunsOf, readPeerLeases } from './adoption.ts';
import { commitSerialized } from './commit-batch.ts';
import { serializeEntry } from './commit-rows.ts';
import { claimCoordinatorLease, releaseCoordinatorLease, renewCoordinatorLease } from './coordinator-lease.ts';
import { markEffectsDone } from './effects.ts';
import { failRuns } from './fail-runs.ts';
import { reclaimOwnRuns } from './reclaim.ts';
import { loadRunsForRestore } from './restore.ts';
import type { Schema } from './schema.ts';

export interface Identity {
  coordinatorId: string;
  epoch: () => number;
}

/** The supervisor's and ownership's ports, on Postgres. Every write is fenced by the epoch. */
export function createRunStore(db: Kysely<Schema>, identity: Identity, clock: Clock): RunStore & OwnershipStore {
  return {
    serialize: serializeEntry,
    commit: (entries) => commitSerialized(db, { coordinatorId: identity.coordinatorId, epoch: identity.epoch(), now: clock.now(), entries }),
    failRuns: (records) => failRuns(db, { coordinatorId: identity.coordinatorId, epoch: identity.epoch(), records }),
    markEffectsDone: (effectIds) => markEffectsDone(db, { effectIds, now: clock.now() }),
    loadRuns: (runIds) => loadRunsForRestore(db, runIds),
    claimLease: (args) => claimCoordinatorLease(db, args),
    renewLease: (args) => renewCoordinatorLease(db, args),
    peerLeases: (args) => readPeerLeases(db, args),
    adoptRunsOf: (args) => adoptRunsOf(db, args),
    reclaimOwnRuns: (args) => reclaimOwnRuns(db, args),
    releaseLease: (args) => releaseCoordinatorLease(db, args),
  };
}
