import type { Kysely } from 'kysely';
import type { Schema } from './schema.ts';

/** Marks outbox effects as executed; effects already done keep their first completion time. */
export async function markEffectsDone(
  db: Kysely<Schema>,
  { effectIds, now }: { effectIds: readonly string[]; now: number },
): Promise<void> {
  if (effectIds.length === 0) return;
  await db
    .updateTable('outbox')
    .set({ done_at: now })
    .where('effect_id', '=', (eb) => eb.fn('any', [eb.val([...effectIds])]))
    .where('done_at', 'is', null)
    .execute();
}
