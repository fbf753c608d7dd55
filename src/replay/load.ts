import type { Kysely } from 'kysely';
import type { RunContext } from '../../machines/run.machine.ts';
import type { PersistedMachineSnapshot } from '../../machines/projection.ts';
import type { JournalRecord } from '../db/journal.ts';
import { RunHistory } from '../retention/run-history.ts';
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

/** Where a run's history is read: the database alone, or wherever retention put it (RunHistory). */
export type HistorySource = Kysely<Schema> | RunHistory;

const historyOf = (source: HistorySource): RunHistory => (source instanceof RunHistory ? source : new RunHistory(source, null));

export async function readStoredSnapshot(source: HistorySource, runId: string): Promise<StoredSnapshot | null> {
  const row = await historyOf(source).snapshot(runId);
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
export async function loadRecordedRun(source: HistorySource, runId: string): Promise<RecordedRun> {
  const history = historyOf(source);
  const [journal, snapshot] = await Promise.all([history.journal(runId), readStoredSnapshot(history, runId)]);
  if (journal.length === 0) throw new ReplayRunNotFoundError(runId);
  return { runId, journal, snapshot };
}
