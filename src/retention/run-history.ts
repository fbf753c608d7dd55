import type { Kysely } from 'kysely';
import { readFirstEvent, readJournal, readSnapshot, type JournalRecord, type SnapshotRecord } from '../db/journal.ts';
import { DEFAULT_LOG_CHUNK_LIMIT, readJobLogs, type LogQuery, type StoredLogChunk } from '../db/job-logs.ts';
import type { Schema } from '../db/schema.ts';
import type { RunArchive, RunArchives } from './archive.ts';

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
    return archive ? archive.events : readJournal(this.db, runId);
  }

  /** The journal and the last snapshot, from one read of the archive when the run is archived. */
  async recorded(runId: string): Promise<{ journal: JournalRecord[]; snapshot: SnapshotRecord | null }> {
    const archive = await this.archiveOf(runId);
    if (archive) return { journal: archive.events, snapshot: archive.snapshot };
    const [journal, snapshot] = await Promise.all([readJournal(this.db, runId), readSnapshot(this.db, runId)]);
    return { journal, snapshot };
  }

  /** The run's frozen input as its first journal event (`run.created`) holds it; null without one. */
  async createdInput(runId: string): Promise<unknown> {
    const archive = await this.archiveOf(runId);
    const first = archive ? archive.events.find((e) => e.seq === 0)?.event : await readFirstEvent(this.db, runId);
    const event = first as { type?: unknown; input?: unknown } | undefined;
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
