import { sql, type Kysely, type Transaction } from 'kysely';
import type { CommitBatchInput } from './commit.types.ts';
import { toCommitRows, type CommitRows } from './commit-rows.ts';
import { FencedError, JournalConflictError } from './errors.ts';
import type { Schema } from './schema.ts';

type Trx = Transaction<Schema>;

/**
 * Group commit: journals the events of many runs and stores their snapshots, projections, timer
 * changes and outbox effects in ONE transaction, all-or-nothing.
 *
 * Fencing: the coordinator row is read FOR SHARE, so a takeover (which bumps the epoch) waits for
 * this transaction and every later one sees the new epoch and throws FencedError. Existing runs
 * must be owned by (coordinatorId, epoch); new runs get their owner row here. A (run, seq) that is
 * already journaled throws JournalConflictError: that event would otherwise be applied twice.
 */
export async function commitBatch(db: Kysely<Schema>, input: CommitBatchInput): Promise<void> {
  if (input.entries.length === 0) return;
  const rows = toCommitRows(input.entries);
  try {
    await db.transaction().execute(async (trx) => {
      await assertOwnership(trx, input, rows.existingRunIds);
      await insertOwners(trx, input, rows.newRunIds);
      await appendEvents(trx, rows.events);
      await upsertSnapshots(trx, rows.snapshots);
      await upsertRuns(trx, rows.runs);
      await upsertJobs(trx, rows.jobs);
      await applyTimers(trx, rows);
      await insertEffects(trx, input.now, rows.effects);
    });
  } catch (error) {
    throw translateConflict(error);
  }
}

async function assertOwnership(trx: Trx, input: CommitBatchInput, existingRunIds: string[]): Promise<void> {
  const { coordinatorId: me, epoch } = input;
  const { rows } = await sql<{ epoch: number | null; mine: number }>`
    SELECT (SELECT epoch FROM coordinators WHERE id = ${me} FOR SHARE) AS epoch,
           (SELECT count(*) FROM run_owner
             WHERE run_id = ANY(${existingRunIds}::text[]) AND coordinator_id = ${me} AND epoch = ${epoch}) AS mine`.execute(trx);
  const found = rows[0];
  if (found?.epoch == null) throw new FencedError(me, epoch, 'its coordinator row is gone');
  if (found.epoch !== epoch) throw new FencedError(me, epoch, `the lease is now at epoch ${found.epoch}`);
  if (found.mine !== existingRunIds.length) {
    const lost = existingRunIds.length - found.mine;
    throw new FencedError(me, epoch, `${lost} of ${existingRunIds.length} runs in the batch are owned by another coordinator`);
  }
}

async function insertOwners(trx: Trx, input: CommitBatchInput, runIds: string[]): Promise<void> {
  if (runIds.length === 0) return;
  await trx
    .insertInto('run_owner')
    .columns(['run_id', 'coordinator_id', 'epoch'])
    .expression(sql`SELECT run_id, ${input.coordinatorId}::text, ${input.epoch}::int8 FROM unnest(${runIds}::text[]) AS t(run_id)`)
    .execute();
}

async function appendEvents(trx: Trx, e: CommitRows['events']): Promise<void> {
  if (e.runId.length === 0) return;
  await trx
    .insertInto('run_events')
    .columns(['run_id', 'seq', 'event', 'received_at', 'state_after'])
    .expression(
      sql`SELECT * FROM unnest(${e.runId}::text[], ${e.seq}::int4[], ${e.event}::jsonb[], ${e.receivedAt}::int8[], ${e.stateAfter}::jsonb[])`,
    )
    .execute();
}

async function upsertSnapshots(trx: Trx, s: CommitRows['snapshots']): Promise<void> {
  await trx
    .insertInto('run_snapshots')
    .columns(['run_id', 'seq', 'machine_id', 'machine_version', 'snapshot', 'status', 'updated_at'])
    .expression(
      sql`SELECT * FROM unnest(${s.runId}::text[], ${s.seq}::int4[], ${s.machineId}::text[], ${s.machineVersion}::int4[],
                               ${s.snapshot}::jsonb[], ${s.status}::text[], ${s.updatedAt}::int8[])`,
    )
    .onConflict((oc) =>
      oc
        .column('run_id')
        .doUpdateSet((eb) => ({
          seq: eb.ref('excluded.seq'),
          machine_id: eb.ref('excluded.machine_id'),
          machine_version: eb.ref('excluded.machine_version'),
          snapshot: eb.ref('excluded.snapshot'),
          status: eb.ref('excluded.status'),
          updated_at: eb.ref('excluded.updated_at'),
        }))
        .where('run_snapshots.seq', '<', (eb) => eb.ref('excluded.seq')),
    )
    .execute();
}

async function upsertRuns(trx: Trx, r: CommitRows['runs']): Promise<void> {
  await trx
    .insertInto('runs')
    .columns([
      'run_id', 'workflow_name', 'repository', 'status', 'created_at', 'updated_at',
      'finished_at', 'failure_reason', 'init_failure', 'input_summary',
    ])
    .expression(
      sql`SELECT * FROM unnest(${r.runId}::text[], ${r.workflowName}::text[], ${r.repository}::text[], ${r.status}::text[],
                               ${r.createdAt}::int8[], ${r.updatedAt}::int8[], ${r.finishedAt}::int8[],
                               ${r.failureReason}::text[], ${r.initFailure}::jsonb[], ${r.inputSummary}::jsonb[])`,
    )
    .onConflict((oc) =>
      oc.column('run_id').doUpdateSet((eb) => ({
        workflow_name: eb.ref('excluded.workflow_name'),
        repository: eb.fn.coalesce('excluded.repository', 'runs.repository'),
        status: eb.ref('excluded.status'),
        updated_at: eb.ref('excluded.updated_at'),
        finished_at: eb.ref('excluded.finished_at'),
        failure_reason: eb.ref('excluded.failure_reason'),
        init_failure: eb.ref('excluded.init_failure'),
        input_summary: eb.fn.coalesce('excluded.input_summary', 'runs.input_summary'),
      })),
    )
    .execute();
}

async function upsertJobs(trx: Trx, j: CommitRows['jobs']): Promise<void> {
  if (j.runId.length === 0) return;
  await trx
    .insertInto('jobs')
    .columns([
      'run_id', 'job_key', 'status', 'waiting_reason', 'attempt', 'agent_id',
      'dispatch_id', 'outcome', 'init_failure', 'updated_at',
    ])
    .expression(
      sql`SELECT * FROM unnest(${j.runId}::text[], ${j.jobKey}::text[], ${j.status}::text[], ${j.waitingReason}::jsonb[],
                               ${j.attempt}::int4[], ${j.agentId}::text[], ${j.dispatchId}::text[], ${j.outcome}::text[],
                               ${j.initFailure}::jsonb[], ${j.updatedAt}::int8[])`,
    )
    .onConflict((oc) =>
      oc.columns(['run_id', 'job_key']).doUpdateSet((eb) => ({
        status: eb.ref('excluded.status'),
        waiting_reason: eb.ref('excluded.waiting_reason'),
        attempt: eb.ref('excluded.attempt'),
        agent_id: eb.ref('excluded.agent_id'),
        dispatch_id: eb.ref('excluded.dispatch_id'),
        outcome: eb.ref('excluded.outcome'),
        init_failure: eb.ref('excluded.init_failure'),
        updated_at: eb.ref('excluded.updated_at'),
      })),
    )
    .execute();
}

async function applyTimers(trx: Trx, { armed: a, disarmed: d }: CommitRows): Promise<void> {
  if (d.runId.length > 0) {
    await sql`DELETE FROM timers t USING unnest(${d.runId}::text[], ${d.deadlineId}::text[]) AS d(run_id, deadline_id)
               WHERE t.run_id = d.run_id AND t.deadline_id = d.deadline_id`.execute(trx);
  }
  if (a.runId.length === 0) return;
  await trx
    .insertInto('timers')
    .columns(['run_id', 'deadline_id', 'kind', 'job_key', 'due_at'])
    .expression(
      sql`SELECT * FROM unnest(${a.runId}::text[], ${a.deadlineId}::text[], ${a.kind}::text[], ${a.jobKey}::text[], ${a.dueAt}::int8[])`,
    )
    .onConflict((oc) =>
      oc.columns(['run_id', 'deadline_id']).doUpdateSet((eb) => ({
        kind: eb.ref('excluded.kind'),
        job_key: eb.ref('excluded.job_key'),
        due_at: eb.ref('excluded.due_at'),
      })),
    )
    .execute();
}

async function insertEffects(trx: Trx, now: number, fx: CommitRows['effects']): Promise<void> {
  if (fx.effectId.length === 0) return;
  await trx
    .insertInto('outbox')
    .columns(['effect_id', 'run_id', 'kind', 'payload', 'created_at'])
    .expression(
      sql`SELECT effect_id, run_id, kind, payload, ${now}::int8
            FROM unnest(${fx.effectId}::text[], ${fx.runId}::text[], ${fx.kind}::text[], ${fx.payload}::jsonb[])
              AS t(effect_id, run_id, kind, payload)`,
    )
    .onConflict((oc) => oc.doNothing())
    .execute();
}

/** Unique violations on the journal or owner keys mean the batch would replay history. */
function translateConflict(error: unknown): unknown {
  if (typeof error !== 'object' || error === null || !('code' in error) || error.code !== '23505') return error;
  const constraint = 'constraint' in error ? String(error.constraint) : '';
  const detail = 'detail' in error ? String(error.detail) : '';
  if (constraint === 'run_events_pkey') return new JournalConflictError(`event already journaled: ${detail}`);
  if (constraint === 'run_owner_pkey') return new JournalConflictError(`a run marked new already exists: ${detail}`);
  return error;
}
