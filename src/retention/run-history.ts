import type { Kysely } from 'kysely';
import { readJournal, readSnapshotRow, type JournalRecord } from '../db/journal.ts';
import { DEFAULT_LOG_CHUNK_LIMIT, readJobLogs, type LogQuery, type StoredLogChunk } from '../db/job-logs.ts';
import type { Schema } from '../db/schema.ts';
import type { RunArchive, RunArchives } from './archive.ts';

export type SnapshotRow = NonNullable<Awaited<ReturnType<typeof readSnapshotRow>>>;

/**
 * A run's history (journal, last snapshot, logs) wherever it is: in the database, or in its archive
 * once retention moved it there (`runs.archived_at`). Every reader of a run's history goes through
 * this, so the API, the runs page and `switchyard replay` work the same on an archived run.
 */
export class RunHistory {
  constructor(
    private readonly db: Kysely<Schema>,
    private readonly archives: RunArchives | null,
  ) {}

  async journal(runId: string): Promise<JournalRecord[]> {
    const archive = await this.archiveOf(runId);
    return archive ? archive.events.map((e) => ({ seq: e.seq, event: e.event, receivedAt: e.receivedAt, stateAfter: e.stateAfter })) : readJournal(this.db, runId);
  }

  async snapshot(runId: string): Promise<SnapshotRow | undefined> {
    const archive = await this.archiveOf(runId);
    if (!archive) return readSnapshotRow(this.db, runId);
    const s = archive.snapshot;
    return s ? { seq: s.seq, machine_id: s.machineId, machine_version: s.machineVersion, snapshot: s.snapshot, status: s.status } : undefined;
  }

  /** The run's frozen input as its first journal event (`run.created`) holds it; null without one. */
  async createdInput(runId: string): Promise<unknown> {
    const [first] = await this.journal(runId);
    const event = first?.seq === 0 ? (first.event as { type?: unknown; input?: unknown }) : undefined;
    return event?.type === 'run.created' ? (event.input ?? null) : null;
  }

  async logs(query: LogQuery): Promise<StoredLogChunk[]> {
    const archive = await this.archiveOf(query.runId);
    if (!archive) return readJobLogs(this.db, query);
    return archive.logs
      .filter((c) => (query.jobKey === undefined || c.jobKey === query.jobKey) && (query.stepIndex === undefined || c.stepIndex === query.stepIndex))
      .filter((c) => query.afterId === undefined || c.id > query.afterId)
      .slice(0, query.limit ?? DEFAULT_LOG_CHUNK_LIMIT);
  }

  /** The run's archive when it is archived; null when its history is in the database. */
  private async archiveOf(runId: string): Promise<RunArchive | null> {
    if (this.archives === null) return null;
    const row = await this.db.selectFrom('runs').select('archived_at').where('run_id', '=', runId).executeTakeFirst();
    return row?.archived_at == null ? null : this.archives.read(runId);
  }
}
