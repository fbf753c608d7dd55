import { Readable } from 'node:stream';
import { buffer } from 'node:stream/consumers';
import { promisify } from 'node:util';
import { gunzip, gzip } from 'node:zlib';
import type { BlobStore } from '../blobs/blob-store.ts';
import type { StoredLogChunk } from '../db/job-logs.ts';
import type { JournalRecord, SnapshotRecord } from '../db/journal.ts';

/**
 * One archived run (docs/retention.md#the-archive-format): its journal with each state after, its
 * last snapshot and its log chunks, as they were in the database, in one gzip'd JSON document in the
 * blob store under `archives/runs/<runId>.json.gz`. The run and job rows stay in the database.
 */
export const ARCHIVE_KIND = 'switchyard-run-archive';
export const ARCHIVE_VERSION = 1;

export interface RunArchive {
  kind: typeof ARCHIVE_KIND;
  version: number;
  runId: string;
  archivedAt: number;
  /** As the database held them: the journal, the snapshot, the log chunks. */
  events: JournalRecord[];
  snapshot: SnapshotRecord | null;
  logs: StoredLogChunk[];
}

/** A run's archive is missing or cannot be read: that run's history is unavailable, nothing else. */
export class ArchiveUnreadableError extends Error {
  override readonly name = 'ArchiveUnreadableError';
  constructor(
    readonly runId: string,
    reason: string,
  ) {
    super(`the archive of run ${runId} cannot be read: ${reason}`);
  }
}

export const archiveKey = (runId: string) => `archives/runs/${runId}.json.gz`;

const gzipAsync = promisify(gzip);
const gunzipAsync = promisify(gunzip);

/** The archives of ended runs, in the blob store (the data dir by default, shared with several coordinators). */
export class RunArchives {
  constructor(private readonly store: BlobStore) {}

  /** Writes (or writes again) a run's archive; resolves with its size once it is readable. */
  async write(archive: RunArchive): Promise<number> {
    const bytes = await gzipAsync(Buffer.from(JSON.stringify(archive)));
    const staged = await this.store.stage(Readable.from([bytes]), Number.MAX_SAFE_INTEGER);
    if (!(await this.store.commit(staged.stagingId, archiveKey(archive.runId)))) throw new Error(`the archive of run ${archive.runId} could not be committed`);
    return staged.sizeBytes;
  }

  async read(runId: string): Promise<RunArchive> {
    const found = await this.store.get(archiveKey(runId));
    if (!found) throw new ArchiveUnreadableError(runId, `no archive at ${archiveKey(runId)} in the ${this.store.kind} blob store`);
    let parsed: unknown;
    try {
      parsed = JSON.parse((await gunzipAsync(await buffer(found.body))).toString('utf8'));
    } catch (thrown) {
      throw new ArchiveUnreadableError(runId, `it is corrupt (${thrown instanceof Error ? thrown.message : String(thrown)})`);
    }
    return checked(runId, parsed);
  }

  delete(runId: string): Promise<void> {
    return this.store.delete(archiveKey(runId));
  }
}

function checked(runId: string, value: unknown): RunArchive {
  const archive = value as Partial<RunArchive> | null;
  if (archive?.kind !== ARCHIVE_KIND) throw new ArchiveUnreadableError(runId, 'it is not a Switchyard run archive');
  if (archive.version !== ARCHIVE_VERSION) throw new ArchiveUnreadableError(runId, `archive version ${String(archive.version)} is not the one this release reads (${ARCHIVE_VERSION})`);
  if (archive.runId !== runId) throw new ArchiveUnreadableError(runId, `it holds run ${String(archive.runId)}`);
  if (!Array.isArray(archive.events) || !Array.isArray(archive.logs)) throw new ArchiveUnreadableError(runId, 'its journal or logs are missing');
  return archive as RunArchive;
}
