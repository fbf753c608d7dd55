import type { Kysely } from 'kysely';
import { toJson } from './json.ts';
import type { Schema } from './schema.ts';

export interface LogChunkInput {
  runId: string;
  jobKey: string;
  dispatchId: string;
  /** -1 for job-level runner lines (docs/protocol.md#messages-from-the-agent). */
  stepIndex: number;
  /** Already redacted (SEC-4): stored exactly as given. */
  lines: readonly string[];
  now: number;
  /** The agent's timestamp of the chunk (`log.chunk.timestamp`). */
  sentAt?: number;
}

export interface StoredLogChunk {
  /** Increasing in arrival order; pass the last one as `afterId` to read on. */
  id: number;
  jobKey: string;
  dispatchId: string;
  stepIndex: number;
  lines: string[];
  /** When the coordinator stored it. */
  at: number;
  /** When the agent sent it; null for chunks stored before this was kept. */
  sentAt: number | null;
}

export interface LogQuery {
  runId: string;
  jobKey?: string;
  stepIndex?: number;
  /** Only chunks with a larger id. */
  afterId?: number;
  /** At most this many chunks. @default 1000 */
  limit?: number;
}

export const DEFAULT_LOG_CHUNK_LIMIT = 1000;

/** Total UTF-8 size of the lines, as stored in `job_logs.bytes`. */
export function utf8Bytes(lines: readonly string[]): number {
  let bytes = 0;
  for (const line of lines) bytes += Buffer.byteLength(line, 'utf8');
  return bytes;
}

/** Stores one `log.chunk`; returns the bytes stored (0, and no row, for an empty chunk). */
export function appendLogChunk(db: Kysely<Schema>, chunk: LogChunkInput): Promise<number> {
  return appendLogChunks(db, [chunk]);
}

/**
 * Stores chunks in one INSERT, in the order given (row ids follow it); empty chunks get no row.
 * Returns the bytes stored.
 */
export async function appendLogChunks(db: Kysely<Schema>, chunks: readonly LogChunkInput[]): Promise<number> {
  const rows = chunks
    .filter((chunk) => chunk.lines.length > 0)
    .map((chunk) => ({
      run_id: chunk.runId,
      job_key: chunk.jobKey,
      dispatch_id: chunk.dispatchId,
      step_index: chunk.stepIndex,
      lines: toJson(chunk.lines),
      bytes: utf8Bytes(chunk.lines),
      created_at: chunk.now,
      sent_at: chunk.sentAt ?? null,
    }));
  if (rows.length === 0) return 0;
  await db.insertInto('job_logs').values(rows).execute();
  return rows.reduce((sum, row) => sum + row.bytes, 0);
}

/** A run's log chunks in arrival order, optionally for one job and one step. */
export async function readJobLogs(db: Kysely<Schema>, query: LogQuery): Promise<StoredLogChunk[]> {
  let select = db
    .selectFrom('job_logs')
    .select(['id', 'job_key', 'dispatch_id', 'step_index', 'lines', 'created_at', 'sent_at'])
    .where('run_id', '=', query.runId)
    .orderBy('id')
    .limit(query.limit ?? DEFAULT_LOG_CHUNK_LIMIT);
  if (query.jobKey !== undefined) select = select.where('job_key', '=', query.jobKey);
  if (query.stepIndex !== undefined) select = select.where('step_index', '=', query.stepIndex);
  if (query.afterId !== undefined) select = select.where('id', '>', query.afterId);
  const rows = await select.execute();
  return rows.map((row) => ({
    id: Number(row.id),
    jobKey: row.job_key,
    dispatchId: row.dispatch_id,
    stepIndex: row.step_index,
    lines: Array.isArray(row.lines) ? row.lines.map(String) : [],
    at: row.created_at,
    sentAt: row.sent_at,
  }));
}

/**
 * Chunks in the order their lines were written: by the agent's timestamp (the coordinator's when
 * there is none), then by arrival. Arrival alone puts a batch that waited, such as the runner's
 * clone line, after the step lines sent while it waited.
 */
export function inWrittenOrder<T extends Pick<StoredLogChunk, 'id' | 'at' | 'sentAt'>>(chunks: readonly T[]): T[] {
  return [...chunks].sort((a, b) => (a.sentAt ?? a.at) - (b.sentAt ?? b.at) || a.id - b.id);
}
