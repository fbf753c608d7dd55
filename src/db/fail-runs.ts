import { sql, type Kysely } from 'kysely';
import { TERMINAL_JOB_STATUSES } from '../../machines/status.ts';
import type { RunFailureRecord } from './commit.types.ts';
import { translateConflict } from './commit-batch.ts';
import { assertFence, fenceCtes, type FenceRow } from './fence.ts';
import { toJson } from './json.ts';
import type { Schema } from './schema.ts';

export interface FailRunsInput {
  coordinatorId: string;
  epoch: number;
  records: readonly RunFailureRecord[];
}

/**
 * Fails runs whose state could not be stored, fenced like a group commit, in one statement: the
 * run row says `failed` with the reason; the snapshot row becomes an XState `error` snapshot with
 * status `failed`, so restore, reclaim and adoption never bring it back as active; unfinished jobs
 * are cancelled, deadlines dropped and pending effects closed. The journal keeps what was durable.
 */
export async function failRuns(db: Kysely<Schema>, input: FailRunsInput): Promise<void> {
  if (input.records.length === 0) return;
  const { coordinatorId: me, epoch } = input;
  const existing = input.records.filter((r) => !r.isNewRun).map((r) => r.runId);
  const rows = toJson(input.records.map((r) => ({
    run_id: r.runId, is_new: r.isNewRun, seq: r.seq, machine_id: r.machineId, machine_version: r.machineVersion,
    workflow_name: r.workflowName, repository: r.repository, created_at: r.createdAt, failed_at: r.failedAt, reason: r.reason,
  })));
  let fence: FenceRow | undefined;
  try {
    const result = await sql<FenceRow>`
      WITH ${fenceCtes(me, epoch, existing)},
      f AS (SELECT * FROM json_to_recordset(${rows}::json) AS t(run_id text, is_new bool, seq int4, machine_id text,
              machine_version int4, workflow_name text, repository text, created_at int8, failed_at int8, reason text)
             WHERE EXISTS (SELECT 1 FROM ok)),
      owners AS (INSERT INTO run_owner (run_id, coordinator_id, epoch, live) SELECT run_id, ${me}::text, ${epoch}::int8, false FROM f WHERE is_new),
      finished AS (UPDATE run_owner o SET live = false FROM f WHERE o.run_id = f.run_id AND NOT f.is_new),
      snapshots AS (
        INSERT INTO run_snapshots AS s (run_id, seq, machine_id, machine_version, snapshot, status, updated_at)
        SELECT run_id, seq, machine_id, machine_version,
               jsonb_build_object('status', 'error', 'error', jsonb_build_object('name', 'RunNotStorableError', 'message', reason)),
               'failed', failed_at FROM f
        ON CONFLICT (run_id) DO UPDATE SET seq = greatest(s.seq, excluded.seq), machine_id = excluded.machine_id,
          machine_version = excluded.machine_version, snapshot = excluded.snapshot, status = excluded.status,
          updated_at = excluded.updated_at),
      runs AS (
        INSERT INTO runs AS r (run_id, workflow_name, repository, status, created_at, updated_at, finished_at, failure_reason)
        SELECT run_id, workflow_name, repository, 'failed', created_at, failed_at, failed_at, reason FROM f
        ON CONFLICT (run_id) DO UPDATE SET repository = coalesce(excluded.repository, r.repository), status = 'failed',
          updated_at = excluded.updated_at, finished_at = excluded.finished_at, failure_reason = excluded.failure_reason),
      jobs AS (
        UPDATE jobs SET status = 'cancelled', waiting_reason = NULL, updated_at = f.failed_at FROM f
         WHERE jobs.run_id = f.run_id AND jobs.status <> ALL(${[...TERMINAL_JOB_STATUSES]}::text[])),
      timers AS (DELETE FROM timers USING f WHERE timers.run_id = f.run_id),
      effects AS (UPDATE outbox SET done_at = f.failed_at FROM f WHERE outbox.run_id = f.run_id AND outbox.done_at IS NULL)
      SELECT epoch, mine FROM fence`.execute(db);
    fence = result.rows[0];
  } catch (error) {
    throw translateConflict(error);
  }
  assertFence(input, existing.length, fence);
}
