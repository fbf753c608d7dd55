import { sql, type Kysely, type RawBuilder } from 'kysely';
import type { CommitBatchInput, CommitEntry } from './commit.types.ts';
import { serializeEntry, toCommitRows, type CommitRows } from './commit-rows.ts';
import { JournalConflictError, classifyDatabaseError } from './errors.ts';
import { executePrepared } from './database.ts';
import { jsonRows, recordset } from './recordset.ts';
import { assertFence, fenceCtes, type FenceRow } from './fence.ts';
import type { Schema } from './schema.ts';

/**
 * Group commit: journals the events of many runs and stores their snapshots, projections, timer
 * changes and outbox effects in ONE statement (so one round trip and one transaction), all or
 * nothing; a named statement, prepared once per connection and shape (which tables the batch
 * writes). Entries arrive serialized (`serializeEntry`, at submit), so nothing here stringifies.
 *
 * Fencing (fence.ts): every write is conditional on this coordinator's epoch and on owning every
 * existing run of the batch; otherwise nothing is written and FencedError is thrown. New runs get
 * their owner row here. A (run, seq) already journaled throws JournalConflictError: it would be
 * applied twice. Any other error is classified as TransientStoreError or PermanentStoreError.
 */
export async function commitSerialized(db: Kysely<Schema>, input: CommitBatchInput): Promise<void> {
  if (input.entries.length === 0) return;
  const rows = toCommitRows(input.entries);
  let fence: FenceRow | undefined;
  try {
    [fence] = await executePrepared<FenceRow>(db, commitStatement(rows, input).compile(db));
  } catch (error) {
    throw translateConflict(error);
  }
  assertFence(input, rows.existingRunIds.length, fence);
}

/** The one statement of a group commit: the fence, then a data-modifying CTE per table the batch writes. */
export function commitStatement(rows: CommitRows, input: Omit<CommitBatchInput, 'entries'>): RawBuilder<FenceRow> {
  return sql<FenceRow>`
      WITH ${fenceCtes(input.coordinatorId, input.epoch, rows.existingRunIds)},
      ${sql.join(writes(rows, input))}
      SELECT epoch, mine FROM fence`;
}

/** `commitSerialized` of entries not yet serialized (tests, benchmarks); throws UnstorableEntryError first. */
export async function commitBatch(db: Kysely<Schema>, input: Omit<CommitBatchInput, 'entries'> & { entries: readonly CommitEntry[] }): Promise<void> {
  await commitSerialized(db, { ...input, entries: input.entries.map(serializeEntry) });
}

/** The condition that keeps a batch's rows only while this coordinator's fence holds. */
const FENCE_HELD = sql`EXISTS (SELECT 1 FROM ok)`;

/** `json_to_recordset($json) AS t(<columns>)`, kept only while the fence holds. */
function fenced(list: readonly string[], columns: string): RawBuilder<unknown> {
  return jsonRows(list, 't', columns, FENCE_HELD);
}

/** The same rows as a subquery to join to a table by its key, with their count for the planner (recordset.ts). */
function fencedToJoin(list: readonly string[], columns: string): RawBuilder<unknown> {
  return recordset(list, 't', columns, FENCE_HELD);
}

/** One data-modifying CTE per table that has rows in this batch. */
function writes(rows: CommitRows, input: Omit<CommitBatchInput, 'entries'>): RawBuilder<unknown>[] {
  const ctes: RawBuilder<unknown>[] = [];
  const add = (name: string, statement: RawBuilder<unknown>) => ctes.push(sql`${sql.id(name)} AS (${statement})`);
  if (rows.newRunIds.length > 0) {
    add('owners', sql`
      INSERT INTO run_owner (run_id, coordinator_id, epoch, live)
      SELECT run_id, ${input.coordinatorId}::text, ${input.epoch}::int8, NOT (run_id = ANY(${rows.finishedRunIds}::text[]))
        FROM unnest(${rows.newRunIds}::text[]) AS t(run_id) WHERE EXISTS (SELECT 1 FROM ok)`);
  }
  const created = new Set(rows.newRunIds);
  const finishedExisting = rows.finishedRunIds.filter((runId) => !created.has(runId));
  if (finishedExisting.length > 0) {
    add('finished', sql`
      UPDATE run_owner SET live = false WHERE run_id = ANY(${finishedExisting}::text[]) AND EXISTS (SELECT 1 FROM ok)`);
  }
  if (rows.events.length > 0) {
    add('events', sql`
      INSERT INTO run_events (run_id, seq, event, received_at, state_after, written_by, writer_epoch)
      SELECT run_id, seq, coalesce(event, 'null'), received_at, coalesce(state_after, 'null'),
             ${input.coordinatorId}::text, ${input.epoch}::int8
        FROM ${fenced(rows.events, 'run_id text, seq int4, event json, received_at int8, state_after json')}`);
  }
  addSnapshots(rows, add);
  addJobs(rows, add);
  addTimersAndEffects(rows, input.now, add);
  return ctes;
}

type AddCte = (name: string, statement: RawBuilder<unknown>) => void;

/**
 * Snapshots stored: their rows. Unchanged runs: the snapshot's seq alone. Changed runs, whether
 * their snapshot is stored or deferred to their journal tail: their run rows.
 */
function addSnapshots(rows: CommitRows, add: AddCte): void {
  if (rows.snapshotSeqs.length > 0) {
    add('snapshot_seqs', sql`
      UPDATE run_snapshots AS s SET seq = t.seq, updated_at = t.updated_at
        FROM ${fencedToJoin(rows.snapshotSeqs, 'run_id text, seq int4, updated_at int8')} AS t
       WHERE s.run_id = t.run_id AND s.seq < t.seq`);
  }
  if (rows.snapshots.length > 0) {
    add('snapshots', sql`
      INSERT INTO run_snapshots AS s (run_id, seq, machine_id, machine_version, snapshot, status, updated_at)
      SELECT run_id, seq, machine_id, machine_version, coalesce(snapshot, 'null'), status, updated_at
        FROM ${fenced(rows.snapshots, 'run_id text, seq int4, machine_id text, machine_version int4, snapshot json, status text, updated_at int8')}
      ON CONFLICT (run_id) DO UPDATE SET seq = excluded.seq, machine_id = excluded.machine_id,
        machine_version = excluded.machine_version, snapshot = excluded.snapshot, status = excluded.status,
        updated_at = excluded.updated_at
      WHERE s.seq < excluded.seq`);
  }
  if (rows.runs.length === 0) return;
  add('runs', sql`
    INSERT INTO runs AS r (run_id, workflow_name, repository, status, created_at, updated_at, finished_at,
                           failure_reason, init_failure, input_summary)
    SELECT * FROM ${fenced(rows.runs, `run_id text, workflow_name text, repository text, status text, created_at int8,
      updated_at int8, finished_at int8, failure_reason text, init_failure jsonb, input_summary jsonb`)}
    ON CONFLICT (run_id) DO UPDATE SET workflow_name = excluded.workflow_name,
      repository = coalesce(excluded.repository, r.repository), status = excluded.status,
      updated_at = excluded.updated_at, finished_at = excluded.finished_at, failure_reason = excluded.failure_reason,
      init_failure = excluded.init_failure, input_summary = coalesce(excluded.input_summary, r.input_summary)`);
}

function addJobs(rows: CommitRows, add: AddCte): void {
  if (rows.removedJobs.length > 0) {
    add('removed_jobs', sql`
      DELETE FROM jobs USING ${fencedToJoin(rows.removedJobs, 'run_id text, job_key text')} AS r
       WHERE jobs.run_id = r.run_id AND jobs.job_key = r.job_key`);
  }
  if (rows.jobs.length === 0) return;
  add('jobs', sql`
    INSERT INTO jobs (run_id, job_key, status, waiting_reason, attempt, agent_id, dispatch_id, outcome,
                      init_failure, updated_at, steps, duration_ms, outputs, times)
    SELECT run_id, job_key, status, waiting_reason, attempt, agent_id, dispatch_id, outcome, init_failure, updated_at,
           coalesce(steps, '[]'), duration_ms, outputs, times
      FROM ${fenced(rows.jobs, `run_id text, job_key text, status text, waiting_reason jsonb, attempt int4,
      agent_id text, dispatch_id text, outcome text, init_failure jsonb, updated_at int8, steps jsonb, duration_ms int8,
      outputs jsonb, times jsonb`)}
    ON CONFLICT (run_id, job_key) DO UPDATE SET status = excluded.status, waiting_reason = excluded.waiting_reason,
      attempt = excluded.attempt, agent_id = excluded.agent_id, dispatch_id = excluded.dispatch_id,
      outcome = excluded.outcome, init_failure = excluded.init_failure, updated_at = excluded.updated_at,
      steps = excluded.steps, duration_ms = excluded.duration_ms, outputs = excluded.outputs, times = excluded.times`);
}

/** Disarmed and armed deadlines are disjoint (the last change per deadline won in toCommitRows). */
function addTimersAndEffects(rows: CommitRows, now: number, add: AddCte): void {
  if (rows.disarmed.length > 0) {
    add('disarmed', sql`
      DELETE FROM timers USING ${fencedToJoin(rows.disarmed, 'run_id text, deadline_id text')} AS d
       WHERE timers.run_id = d.run_id AND timers.deadline_id = d.deadline_id`);
  }
  if (rows.armed.length > 0) {
    add('armed', sql`
      INSERT INTO timers (run_id, deadline_id, kind, job_key, due_at)
      SELECT * FROM ${fenced(rows.armed, 'run_id text, deadline_id text, kind text, job_key text, due_at int8')}
      ON CONFLICT (run_id, deadline_id) DO UPDATE SET kind = excluded.kind, job_key = excluded.job_key,
        due_at = excluded.due_at`);
  }
  if (rows.effects.length > 0) {
    add('effects', sql`
      INSERT INTO outbox (effect_id, run_id, kind, payload, created_at)
      SELECT effect_id, run_id, kind, coalesce(payload, 'null'), ${now}::int8
        FROM ${fenced(rows.effects, 'effect_id text, run_id text, kind text, payload jsonb')}
      ON CONFLICT (effect_id) DO NOTHING`);
  }
}

/** Unique violations on the journal or owner keys mean the batch would replay history; the rest is classified. */
export function translateConflict(error: unknown): Error {
  if (typeof error === 'object' && error !== null && 'code' in error && error.code === '23505') {
    const constraint = 'constraint' in error ? String(error.constraint) : '';
    const detail = 'detail' in error ? String(error.detail) : '';
    if (constraint === 'run_events_pkey') return new JournalConflictError(`event already journaled: ${detail}`);
    if (constraint === 'run_owner_pkey') return new JournalConflictError(`a run marked new already exists: ${detail}`);
  }
  return classifyDatabaseError(error);
}
