import type { Kysely } from 'kysely';
import type { RunContext } from '../../machines/run.machine.ts';
import type { PersistedMachineSnapshot } from '../../machines/projection.ts';
import { readJournal, readSnapshotRow } from '../db/journal.ts';
import type { JournalRecord } from '../db/journal.ts';
import type { Schema } from '../db/schema.ts';
import { ReplayRunNotFoundError } from './errors.ts';

export interface StoredSnapshot {
  seq: number;
  machineId: string;
  machineVersion: number;
  snapshot: PersistedMachineSnapshot<RunContext>;
  status: string;
}

/** Everything the database holds about one run's actor: its journal and its latest snapshot. */
export interface RecordedRun {
  runId: string;
  journal: JournalRecord[];
  snapshot: StoredSnapshot | null;
}

export async function readStoredSnapshot(db: Kysely<Schema>, runId: string): Promise<StoredSnapshot | null> {
  const row = await readSnapshotRow(db, runId);
  if (!row) return null;
  return {
    seq: row.seq,
    machineId: row.machine_id,
    machineVersion: row.machine_version,
    snapshot: row.snapshot as PersistedMachineSnapshot<RunContext>,
    status: row.status,
  };
}

/** Loads a run for replay; throws ReplayRunNotFoundError when it has no journal. */
export async function loadRecordedRun(db: Kysely<Schema>, runId: string): Promise<RecordedRun> {
  const [journal, snapshot] = await Promise.all([readJournal(db, runId), readStoredSnapshot(db, runId)]);
  if (journal.length === 0) throw new ReplayRunNotFoundError(runId);
  return { runId, journal, snapshot };
}
