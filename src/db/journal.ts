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

/** The event the run accepted first (`run.created`, holding its frozen input); undefined without one. */
export async function readFirstEvent(db: Kysely<Schema>, runId: string): Promise<unknown> {
  return (await db.selectFrom('run_events').select('event').where('run_id', '=', runId).where('seq', '=', 0).executeTakeFirst())?.event;
}

/** A run's latest stored snapshot, as the supervisor wrote it. */
export interface SnapshotRecord {
  seq: number;
  machineId: string;
  machineVersion: number;
  snapshot: unknown;
  status: string;
}

export async function readSnapshot(db: Kysely<Schema>, runId: string): Promise<SnapshotRecord | null> {
  const row = await db.selectFrom('run_snapshots').select(['seq', 'machine_id', 'machine_version', 'snapshot', 'status']).where('run_id', '=', runId).executeTakeFirst();
  return row ? { seq: row.seq, machineId: row.machine_id, machineVersion: row.machine_version, snapshot: row.snapshot, status: row.status } : null;
}
