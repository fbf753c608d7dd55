import type { Kysely } from 'kysely';
import type { RunContext } from '../../machines/run.machine.ts';
import type { PersistedMachineSnapshot } from '../../machines/projection.ts';
import type { JournalRecord, SnapshotRecord } from '../db/journal.ts';
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

/** The run's snapshot as replay reads it: the chart's persisted form. */
const storedSnapshot = (record: SnapshotRecord | null): StoredSnapshot | null => (record ? { ...record, snapshot: record.snapshot as PersistedMachineSnapshot<RunContext> } : null);

/** Loads a run for replay; throws ReplayRunNotFoundError when it has no journal. */
export async function loadRecordedRun(source: HistorySource, runId: string): Promise<RecordedRun> {
  const { journal, snapshot } = await historyOf(source).recorded(runId);
  if (journal.length === 0) throw new ReplayRunNotFoundError(runId);
  return { runId, journal, snapshot: storedSnapshot(snapshot) };
}
