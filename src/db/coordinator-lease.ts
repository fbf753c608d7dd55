import type { Kysely } from 'kysely';
import type { Schema } from './schema.ts';

/**
 * Takes the lease for `id`: a new coordinator starts at epoch 1; a restart under the same id bumps
 * the epoch, which fences whatever process still writes under the old one. `livenessKey` names the
 * liveness lock this process holds (src/db/liveness-lock.ts); null: it holds none.
 */
export async function claimCoordinatorLease(
  db: Kysely<Schema>,
  { id, ttlMs, now, httpUrl = null, livenessKey = null }: { id: string; ttlMs: number; now: number; httpUrl?: string | null; livenessKey?: number | null },
): Promise<{ epoch: number }> {
  const row = await db
    .insertInto('coordinators')
    .values({ id, epoch: 1, lease_until: now + ttlMs, started_at: now, http_url: httpUrl, liveness_key: livenessKey, renewed_at: now })
    .onConflict((oc) =>
      oc.column('id').doUpdateSet((eb) => ({
        epoch: eb('coordinators.epoch', '+', 1),
        lease_until: eb.ref('excluded.lease_until'),
        started_at: eb.ref('excluded.started_at'),
        http_url: eb.ref('excluded.http_url'),
        liveness_key: eb.ref('excluded.liveness_key'),
        renewed_at: eb.ref('excluded.renewed_at'),
      })),
    )
    .returning('epoch')
    .executeTakeFirstOrThrow();
  return { epoch: row.epoch };
}

/** Extends the lease if the epoch is still ours. False means fenced: another process took over. */
export async function renewCoordinatorLease(
  db: Kysely<Schema>,
  { id, epoch, ttlMs, now }: { id: string; epoch: number; ttlMs: number; now: number },
): Promise<boolean> {
  const result = await db
    .updateTable('coordinators')
    .set({ lease_until: now + ttlMs, renewed_at: now })
    .where('id', '=', id)
    .where('epoch', '=', epoch)
    .executeTakeFirst();
  return result.numUpdatedRows > 0n;
}

/**
 * Expires the lease at once on a clean shutdown so another coordinator adopts the runs without
 * waiting for the TTL. False means the lease was already taken over.
 */
export async function releaseCoordinatorLease(
  db: Kysely<Schema>,
  { id, epoch }: { id: string; epoch: number },
): Promise<boolean> {
  const result = await db
    .updateTable('coordinators')
    .set({ lease_until: 0 })
    .where('id', '=', id)
    .where('epoch', '=', epoch)
    .executeTakeFirst();
  return result.numUpdatedRows > 0n;
}
