import { sql, type Kysely } from 'kysely';
import type { Logger } from 'pino';
import type { Schema } from '../db/schema.ts';
import { readJobLogs } from '../db/job-logs.ts';
import { readJournal, readSnapshot } from '../db/journal.ts';
import type { RunArchive, RunArchives } from './archive.ts';
import { ARCHIVE_KIND, ARCHIVE_VERSION } from './archive.ts';

export interface RetentionPolicy {
  /** Ended runs whose end is older than this are archived. */
  runsOlderThanMs: number;
  /** Processed or dead deliveries older than this are removed. */
  deliveriesOlderThanMs: number;
}

export interface RetentionReport {
  dryRun: boolean;
  startedAt: number;
  tookMs: number;
  runs: { archived: number; archiveBytes: number; rowsRemoved: Record<'run_events' | 'run_snapshots' | 'job_logs', number>; databaseBytesRemoved: number };
  deliveries: { removed: number; databaseBytesRemoved: number };
  /** Runs this pass could not archive, each with why; the next pass tries them again. */
  failed: { runId: string; reason: string }[];
}

export interface RetentionDeps {
  db: Kysely<Schema>;
  archives: RunArchives;
  now: () => number;
  log: Logger;
  /** True once the coordinator stops: the pass ends after the run in hand, the rest waits for the next. */
  stopping?: () => boolean;
}

/** Runs per query; each run is archived and removed in its own short transaction. */
const RUN_BATCH = 50;
const DELIVERY_BATCH = 1_000;
const TERMINAL = ['success', 'failed', 'cancelled'];

/**
 * One retention pass (docs/retention.md): each ended run past its window is archived (its journal,
 * snapshot and logs written to its archive and read back) and then its rows leave the database in
 * one transaction, so a pass killed at any point loses nothing: a run whose rows are still there is
 * archived again by the next pass. Old processed deliveries are removed. A dry run counts only.
 */
export async function runRetentionPass(deps: RetentionDeps, policy: RetentionPolicy, options: { dryRun: boolean }): Promise<RetentionReport> {
  const startedAt = deps.now();
  const report: RetentionReport = {
    dryRun: options.dryRun,
    startedAt,
    tookMs: 0,
    runs: { archived: 0, archiveBytes: 0, rowsRemoved: { run_events: 0, run_snapshots: 0, job_logs: 0 }, databaseBytesRemoved: 0 },
    deliveries: { removed: 0, databaseBytesRemoved: 0 },
    failed: [],
  };
  const skip = new Set<string>();
  while (deps.stopping?.() !== true) {
    const batch = await runsToArchive(deps.db, startedAt - policy.runsOlderThanMs, options.dryRun ? report.runs.archived + report.failed.length : 0, [...skip]);
    if (batch.length === 0) break;
    for (const runId of batch) {
      if (deps.stopping?.() === true) break;
      try {
        await archiveRun(deps, runId, report, options.dryRun);
      } catch (thrown) {
        const reason = thrown instanceof Error ? thrown.message : String(thrown);
        deps.log.error({ runId, err: thrown }, 'retention: the run could not be archived; the next pass tries again');
        report.failed.push({ runId, reason });
        skip.add(runId);
      }
    }
    await new Promise((resolve) => setImmediate(resolve)); // between batches, the dispatch path goes first
  }
  await removeDeliveries(deps.db, startedAt - policy.deliveriesOlderThanMs, report, options.dryRun);
  report.tookMs = deps.now() - startedAt;
  return report;
}

async function runsToArchive(db: Kysely<Schema>, endedBefore: number, offset: number, skip: string[]): Promise<string[]> {
  let query = db
    .selectFrom('runs')
    .innerJoin('run_owner', 'run_owner.run_id', 'runs.run_id')
    .select('runs.run_id')
    .where('runs.archived_at', 'is', null)
    .where('runs.finished_at', '<', endedBefore)
    .where('runs.status', 'in', TERMINAL)
    .where('run_owner.live', '=', false)
    .orderBy('runs.finished_at')
    .orderBy('runs.run_id')
    .offset(offset)
    .limit(RUN_BATCH);
  if (skip.length > 0) query = query.where('runs.run_id', 'not in', skip);
  return (await query.execute()).map((row) => row.run_id);
}

async function archiveRun(deps: RetentionDeps, runId: string, report: RetentionReport, dryRun: boolean): Promise<void> {
  const archive = await archiveOf(deps.db, runId, deps.now());
  const sizes = await databaseBytes(deps.db, runId);
  if (!dryRun) {
    report.runs.archiveBytes += await deps.archives.write(archive);
    const back = await deps.archives.read(runId);
    if (back.events.length !== archive.events.length || back.logs.length !== archive.logs.length) throw new Error('the archive read back differs from what was written');
    await deps.db.transaction().execute(async (trx) => {
      await trx.deleteFrom('run_events').where('run_id', '=', runId).execute();
      await trx.deleteFrom('run_snapshots').where('run_id', '=', runId).execute();
      await trx.deleteFrom('job_logs').where('run_id', '=', runId).execute();
      await trx.updateTable('runs').set({ archived_at: archive.archivedAt }).where('run_id', '=', runId).execute();
    });
  }
  report.runs.archived += 1;
  report.runs.rowsRemoved.run_events += archive.events.length;
  report.runs.rowsRemoved.run_snapshots += archive.snapshot ? 1 : 0;
  report.runs.rowsRemoved.job_logs += archive.logs.length;
  report.runs.databaseBytesRemoved += sizes;
}

async function archiveOf(db: Kysely<Schema>, runId: string, now: number): Promise<RunArchive> {
  const [events, snapshot, logs] = await Promise.all([readJournal(db, runId), readSnapshot(db, runId), readJobLogs(db, { runId, limit: Number.MAX_SAFE_INTEGER })]);
  return { kind: ARCHIVE_KIND, version: ARCHIVE_VERSION, runId, archivedAt: now, events, snapshot, logs };
}

/** The bytes the run's history takes in the database's rows (Postgres's own measure). */
async function databaseBytes(db: Kysely<Schema>, runId: string): Promise<number> {
  const { rows } = await sql<{ bytes: number }>`
    SELECT (SELECT coalesce(sum(pg_column_size(e.*)), 0) FROM run_events e WHERE e.run_id = ${runId})
         + (SELECT coalesce(sum(pg_column_size(s.*)), 0) FROM run_snapshots s WHERE s.run_id = ${runId})
         + (SELECT coalesce(sum(pg_column_size(l.*)), 0) FROM job_logs l WHERE l.run_id = ${runId}) AS bytes`.execute(db);
  return Number(rows[0]?.bytes ?? 0);
}

async function removeDeliveries(db: Kysely<Schema>, receivedBefore: number, report: RetentionReport, dryRun: boolean): Promise<void> {
  const finished = sql`status IN ('processed', 'dead') AND received_at < ${receivedBefore}`;
  if (dryRun) {
    const { rows } = await sql<{ n: number; bytes: number }>`SELECT count(*)::int AS n, coalesce(sum(pg_column_size(d.*)), 0)::int8 AS bytes FROM deliveries d WHERE ${finished}`.execute(db);
    report.deliveries = { removed: rows[0]?.n ?? 0, databaseBytesRemoved: Number(rows[0]?.bytes ?? 0) };
    return;
  }
  for (;;) {
    const { rows } = await sql<{ bytes: number }>`
      DELETE FROM deliveries d WHERE ctid IN (SELECT ctid FROM deliveries WHERE ${finished} LIMIT ${DELIVERY_BATCH})
      RETURNING pg_column_size(d.*) AS bytes`.execute(db);
    if (rows.length === 0) return;
    report.deliveries.removed += rows.length;
    report.deliveries.databaseBytesRemoved += rows.reduce((sum, row) => sum + Number(row.bytes), 0);
  }
}
