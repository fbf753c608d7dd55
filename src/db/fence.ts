import { sql, type RawBuilder } from 'kysely';
import { FencedError } from './errors.ts';

export interface FenceRow {
  epoch: number;
  mine: number;
}

/**
 * The `fence` and `ok` CTEs every runtime write starts with: `fence` reads this coordinator's row
 * FOR SHARE and counts the given existing runs owned by (me, epoch); `ok` has a row only when both
 * match, and every write selects from it. A takeover bumps the epoch under a row lock, so it waits
 * for an in-flight write, and every later write sees the new epoch and writes nothing.
 */
export function fenceCtes(me: string, epoch: number, existingRunIds: readonly string[]): RawBuilder<unknown> {
  return sql`fence AS (
      SELECT c.epoch,
             (SELECT count(*) FROM run_owner o
               WHERE o.run_id = ANY(${existingRunIds}::text[]) AND o.coordinator_id = ${me} AND o.epoch = ${epoch}) AS mine
        FROM coordinators c WHERE c.id = ${me} FOR SHARE),
    ok AS (SELECT 1 FROM fence WHERE epoch = ${epoch} AND mine = ${existingRunIds.length})`;
}

/** Throws FencedError unless the fence row says the write went through. */
export function assertFence(input: { coordinatorId: string; epoch: number }, existing: number, fence: FenceRow | undefined): void {
  const { coordinatorId: me, epoch } = input;
  if (fence === undefined) throw new FencedError(me, epoch, 'its coordinator row is gone');
  // Number(): correct even on a pool without the int8 parser, where bigint arrives as a string.
  const current = Number(fence.epoch);
  if (current !== epoch) throw new FencedError(me, epoch, `the lease is now at epoch ${current}`);
  const mine = Number(fence.mine);
  if (mine !== existing) throw new FencedError(me, epoch, `${existing - mine} of ${existing} runs in the batch are owned by another coordinator`);
}
