/**
 * Rows sent as one JSON parameter and joined to a table on its key are looked up through the
 * table's primary key, not found by reading the whole table (src/db/recordset.ts). Planned as the
 * 100 rows Postgres assumes for `json_to_recordset`, one disarmed timer made it hash that guess and
 * scan `timers`: 3.4–5.4 ms a statement at 20,000 rows, in every commit that disarms a deadline.
 */
import { it } from 'node:test';
import assert from 'node:assert/strict';
import { sql, type Kysely, type RawBuilder } from 'kysely';
import { commitStatement } from '../../../src/db/commit-batch.ts';
import { serializeEntry, toCommitRows } from '../../../src/db/commit-rows.ts';
import { recordset } from '../../../src/db/recordset.ts';
import type { Schema } from '../../../src/db/schema.ts';
import { describeEachKind, withTestDatabase } from '../../support/database.ts';
import { entry } from './fixtures.ts';

/** Enough rows that a scan costs the planner more than a few key lookups (it chose the scan at 2,000 and 20,000). */
const TABLE_ROWS = 5_000;

async function fillTables(db: Kysely<Schema>): Promise<void> {
  const rows = sql`generate_series(1, ${TABLE_ROWS}::int) AS g`;
  await sql`INSERT INTO timers (run_id, deadline_id, kind, job_key, due_at) SELECT 'r' || g, 'build#lease', 'lease', 'build', 1 FROM ${rows}`.execute(db);
  await sql`INSERT INTO jobs (run_id, job_key, status, attempt, updated_at) SELECT 'r' || g, 'build', 'queued', 1, 1 FROM ${rows}`.execute(db);
  await sql`INSERT INTO run_snapshots (run_id, seq, machine_id, machine_version, snapshot, status, updated_at)
            SELECT 'r' || g, 1, 'run', 1, '{}', 'pending', 1 FROM ${rows}`.execute(db);
  await sql`INSERT INTO run_owner (run_id, coordinator_id, epoch, live) SELECT 'r' || g, 'coord-a', 1, true FROM ${rows}`.execute(db);
  await sql`ANALYZE timers, jobs, run_snapshots, run_owner`.execute(db);
}

async function planOf(db: Kysely<Schema>, statement: RawBuilder<unknown>): Promise<string> {
  const { rows } = await sql<{ 'QUERY PLAN': string }>`EXPLAIN ${statement}`.execute(db);
  return rows.map((row) => row['QUERY PLAN']).join('\n');
}

/** A parameter as an SQL literal, for `EXECUTE` (Postgres coerces it to the type it inferred). */
function literal(value: unknown): string {
  if (typeof value === 'number') return String(value);
  const text = Array.isArray(value) ? `{${value.map((item) => `"${String(item)}"`).join(',')}}` : String(value);
  return `'${text.replaceAll("'", "''")}'`;
}

/** The plan Postgres reuses for a prepared statement once it stops planning each execution anew. */
async function genericPlanOf(db: Kysely<Schema>, statement: RawBuilder<unknown>): Promise<string> {
  const compiled = statement.compile(db);
  return db.transaction().execute(async (trx) => {
    await sql`SET LOCAL plan_cache_mode = force_generic_plan`.execute(trx);
    await sql`PREPARE join_plan_probe AS ${sql.raw(compiled.sql)}`.execute(trx);
    const plan = await planOf(trx, sql`EXECUTE join_plan_probe(${sql.raw(compiled.parameters.map(literal).join(', '))})`);
    await sql`DEALLOCATE join_plan_probe`.execute(trx);
    return plan;
  });
}

const SCANNED = /Seq Scan on (timers|jobs|run_snapshots|run_owner)\b/;

await describeEachKind('rows sent as JSON, joined to a table on its key', (kind) => {
  it('the group commit checks its fence, disarms timers, moves snapshot seqs, removes jobs and finishes runs by their primary keys, whether the plan is made per execution or reused', () =>
    withTestDatabase(kind, async ({ db }) => {
      await fillTables(db);
      const finished = { workflowName: 'build', repository: null, status: 'success', createdAt: 1_001, finishedAt: 1_009, failureReason: null, initFailure: null };
      const entries = [
        entry('r7', 2, { timers: [{ op: 'disarm', deadlineId: 'build#lease' }], removedJobs: ['build'] }),
        entry('r8', 3, { unchanged: true }),
        entry('r9', 4, { run: finished }),
      ];
      const rows = toCommitRows(entries.map(serializeEntry));
      const written = [rows.existingRunIds, rows.finishedRunIds, rows.disarmed, rows.removedJobs, rows.snapshotSeqs].map((list) => list.length);
      assert.deepEqual(written, [3, 1, 1, 1, 1], 'the batch checks and writes every join');
      const statement = commitStatement(rows, { coordinatorId: 'coord-a', epoch: 1, now: 5_000 });
      for (const [how, plan] of [['per execution', await planOf(db, statement)], ['reused', await genericPlanOf(db, statement)]] as const) {
        assert.doesNotMatch(plan, SCANNED, `${how}: no table is read whole\n${plan}`);
        for (const index of ['timers_pkey', 'jobs_pkey', 'run_snapshots_pkey', 'run_owner_pkey']) assert.match(plan, new RegExp(`Index Scan (using|on) ${index}`), `${how}: ${index}\n${plan}`);
      }
    }));

  it('a recordset is looked up by the key; the same rows without their count make Postgres read the whole table (what this guards against)', () =>
    withTestDatabase(kind, async ({ db }) => {
      await fillTables(db);
      const row = JSON.stringify({ run_id: 'r7', deadline_id: 'build#lease' });
      const join = (rows: RawBuilder<unknown>) => sql`DELETE FROM timers USING ${rows} AS d WHERE timers.run_id = d.run_id AND timers.deadline_id = d.deadline_id`;
      const counted = await planOf(db, join(recordset([row], 't', 'run_id text, deadline_id text')));
      assert.match(counted, /Index Scan using timers_pkey/, counted);
      const uncounted = await planOf(db, join(sql`(SELECT * FROM json_to_recordset(${`[${row}]`}::json) AS t(run_id text, deadline_id text))`));
      assert.match(uncounted, /Seq Scan on timers/, uncounted);
    }));
});
