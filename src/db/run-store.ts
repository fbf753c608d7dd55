import type { Kysely } from 'kysely';
import type { OwnershipStore } from '../../actors/runs/ownership.ts';
import type { RunStore } from '../../actors/runs/ports.ts';
import type { Clock } from '../../actors/clock.ts';
import { adoptRunsOf, readPeerLeases } from './adoption.ts';
import { commitSerialized } from './commit-batch.ts';
import { serializeEntry } from './commit-rows.ts';
import { claimCoordinatorLease, releaseCoordinatorLease, renewCoordinatorLease } from './coordinator-lease.ts';
import { markEffectsDone } from './effects.ts';
import { START_RETRY_WAITS_MS, classifyDatabaseError, retryingTransient } from './errors.ts';
import { failRuns } from './fail-runs.ts';
import { ownedLiveRuns, reclaimOwnRuns } from './reclaim.ts';
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
    loadRuns: (runIds) => classifyingErrors(() => loadRunsForRestore(db, runIds)),
    // The start-up statements: one cut off by a transient error is tried again, not fatal (both are idempotent enough:
    // a claim that committed unseen only bumped the epoch once more).
    claimLease: (args) => retryingTransient(() => claimCoordinatorLease(db, args), START_RETRY_WAITS_MS),
    renewLease: (args) => renewCoordinatorLease(db, args),
    peerLeases: (args) => readPeerLeases(db, args),
    adoptRunsOf: (args) => classifyingErrors(() => adoptRunsOf(db, args)),
    ownedLiveRuns: (args) => ownedLiveRuns(db, args),
    reclaimOwnRuns: (args) => retryingTransient(() => reclaimOwnRuns(db, args), START_RETRY_WAITS_MS),
    releaseLease: (args) => releaseCoordinatorLease(db, args),
  };
}

/** `query`'s result; a database error is thrown as TransientStoreError or PermanentStoreError, which ownership tells apart. */
async function classifyingErrors<T>(query: () => Promise<T>): Promise<T> {
  try {
    return await query();
  } catch (thrown) {
    throw classifyDatabaseError(thrown);
  }
}
