import type { Kysely } from 'kysely';
import type { Schema } from './schema.ts';

export interface JournalRecord {
  seq: number;
  event: unknown;
  receivedAt: number;
  stateAfter: unknown;
}

/** Every event a run accepted, in the order it applied them (for replay and diagnosis). */
export async function readJournal(db: Kysely<Schema>, runId: string): Promise<JournalRecord[]> {
  const rows = await db
    .selectFrom('run_events')
    .select(['seq', 'event', 'received_at', 'state_after'])
    .where('run_id', '=', runId)
    .orderBy('seq')
    .execute();
  return rows.map((row) => ({ seq: row.seq, event: row.event, receivedAt: row.received_at, stateAfter: row.state_after }));
}

/** The run's latest snapshot row, as the supervisor wrote it. */
export function readSnapshotRow(db: Kysely<Schema>, runId: string) {
  return db.selectFrom('run_snapshots').select(['seq', 'machine_id', 'machine_version', 'snapshot', 'status']).where('run_id', '=', runId).executeTakeFirst();
}
