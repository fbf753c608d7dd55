import { sql, type Kysely } from 'kysely';

/** Leases, ownership, journal, snapshots, query projections, durable timers and the effect outbox. */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('coordinators')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('epoch', 'bigint', (c) => c.notNull())
    .addColumn('lease_until', 'bigint', (c) => c.notNull())
    .addColumn('started_at', 'bigint', (c) => c.notNull())
    .addColumn('http_url', 'text')
    .execute();

  await db.schema
    .createTable('run_owner')
    .addColumn('run_id', 'text', (c) => c.primaryKey())
    .addColumn('coordinator_id', 'text', (c) => c.notNull())
    .addColumn('epoch', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('run_owner_coordinator_idx').on('run_owner').column('coordinator_id').execute();

  await db.schema
    .createTable('run_events')
    .addColumn('run_id', 'text', (c) => c.notNull())
    .addColumn('seq', 'integer', (c) => c.notNull())
    .addColumn('event', 'jsonb', (c) => c.notNull())
    .addColumn('received_at', 'bigint', (c) => c.notNull())
    .addColumn('state_after', 'jsonb', (c) => c.notNull())
    .addPrimaryKeyConstraint('run_events_pkey', ['run_id', 'seq'])
    .execute();

  await db.schema
    .createTable('run_snapshots')
    .addColumn('run_id', 'text', (c) => c.primaryKey())
    .addColumn('seq', 'integer', (c) => c.notNull())
    .addColumn('machine_id', 'text', (c) => c.notNull())
    .addColumn('machine_version', 'integer', (c) => c.notNull())
    .addColumn('snapshot', 'jsonb', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'bigint', (c) => c.notNull())
    .execute();

  await createProjections(db);
  await createTimersAndOutbox(db);
}

async function createProjections(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('runs')
    .addColumn('run_id', 'text', (c) => c.primaryKey())
    .addColumn('workflow_name', 'text')
    .addColumn('repository', 'text')
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('created_at', 'bigint')
    .addColumn('updated_at', 'bigint')
    .addColumn('finished_at', 'bigint')
    .addColumn('failure_reason', 'text')
    .addColumn('init_failure', 'jsonb')
    .addColumn('input_summary', 'jsonb')
    .execute();
  await db.schema.createIndex('runs_status_idx').on('runs').column('status').execute();

  await db.schema
    .createTable('jobs')
    .addColumn('run_id', 'text', (c) => c.notNull())
    .addColumn('job_key', 'text', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('waiting_reason', 'jsonb')
    .addColumn('attempt', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('agent_id', 'text')
    .addColumn('dispatch_id', 'text')
    .addColumn('outcome', 'text')
    .addColumn('init_failure', 'jsonb')
    .addColumn('updated_at', 'bigint', (c) => c.notNull())
    .addPrimaryKeyConstraint('jobs_pkey', ['run_id', 'job_key'])
    .execute();
  await db.schema.createIndex('jobs_status_idx').on('jobs').column('status').execute();
  await db.schema.createIndex('jobs_dispatch_id_idx').on('jobs').column('dispatch_id').execute();
}

async function createTimersAndOutbox(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('timers')
    .addColumn('run_id', 'text', (c) => c.notNull())
    .addColumn('deadline_id', 'text', (c) => c.notNull())
    .addColumn('kind', 'text', (c) => c.notNull())
    .addColumn('job_key', 'text')
    .addColumn('due_at', 'bigint', (c) => c.notNull())
    .addPrimaryKeyConstraint('timers_pkey', ['run_id', 'deadline_id'])
    .execute();
  await db.schema.createIndex('timers_due_at_idx').on('timers').column('due_at').execute();

  await db.schema
    .createTable('outbox')
    .addColumn('effect_id', 'text', (c) => c.primaryKey())
    .addColumn('run_id', 'text', (c) => c.notNull())
    .addColumn('kind', 'text', (c) => c.notNull())
    .addColumn('payload', 'jsonb', (c) => c.notNull())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('done_at', 'bigint')
    .execute();
  await db.schema
    .createIndex('outbox_pending_idx')
    .on('outbox')
    .columns(['run_id', 'created_at'])
    .where(sql.ref('done_at'), 'is', null)
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  for (const table of ['outbox', 'timers', 'jobs', 'runs', 'run_snapshots', 'run_events', 'run_owner', 'coordinators']) {
    await db.schema.dropTable(table).ifExists().execute();
  }
}
