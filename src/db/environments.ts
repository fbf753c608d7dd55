import { sql } from 'kysely';
import type { Kysely, Transaction } from 'kysely';
import type { ApprovalGate } from '../../machines/environment.ts';
import type { Schema } from './schema.ts';

export type TrustTier = 'trusted' | 'known' | 'unknown';

/** An environment's settings as the API writes them (ENV-1); variables are kept apart. */
export interface EnvironmentSettings {
  name: string;
  /** owner/name; empty: every repository. */
  repositories: string[];
  /** Branch globs (picomatch); empty: every branch. */
  branches: string[];
  minimumTrust: TrustTier | null;
  approvalRequired: boolean;
  approvers: string | null;
  holdExpirySeconds: number;
  allowLocalExecution: boolean;
}

export interface EnvironmentRecord extends EnvironmentSettings {
  variables: Record<string, string>;
  createdAt: number;
  updatedAt: number;
}

type Db = Kysely<Schema> | Transaction<Schema>;

function stringList(value: unknown): string[] {
  return Array.isArray(value) ? value.filter((item): item is string => typeof item === 'string') : [];
}

/** Environments with their bindings and variables; `names` limits them, else every one. */
export async function loadEnvironments(db: Db, names?: readonly string[]): Promise<EnvironmentRecord[]> {
  if (names !== undefined && names.length === 0) return [];
  let query = db.selectFrom('environments').selectAll().orderBy('name');
  if (names !== undefined) query = query.where('name', 'in', names);
  const rows = await query.execute();
  if (rows.length === 0) return [];
  const found = rows.map((row) => row.name);
  const bindings = await db.selectFrom('environment_repositories').selectAll().where('environment', 'in', found).orderBy('repository').execute();
  const variables = await db.selectFrom('environment_variables').selectAll().where('environment', 'in', found).orderBy('key').execute();
  return rows.map((row) => ({
    name: row.name,
    repositories: bindings.filter((b) => b.environment === row.name).map((b) => b.repository),
    branches: stringList(row.branches),
    minimumTrust: row.minimum_trust,
    approvalRequired: row.approval_required,
    approvers: row.approvers,
    holdExpirySeconds: row.hold_expiry_seconds,
    allowLocalExecution: row.allow_local_execution,
    variables: Object.fromEntries(variables.filter((v) => v.environment === row.name).map((v) => [v.key, v.value])),
    createdAt: Number(row.created_at),
    updatedAt: Number(row.updated_at),
  }));
}

export async function getEnvironment(db: Db, name: string): Promise<EnvironmentRecord | null> {
  return (await loadEnvironments(db, [name]))[0] ?? null;
}

/**
 * Creates or replaces an environment's settings and bindings in one transaction; `variables`, when
 * given, replaces the whole variable set. True when it was created.
 */
export async function putEnvironment(db: Kysely<Schema>, settings: EnvironmentSettings, variables: Record<string, string> | undefined, now: number): Promise<boolean> {
  return db.transaction().execute(async (trx) => {
    const columns = {
      branches: JSON.stringify(settings.branches),
      minimum_trust: settings.minimumTrust,
      approval_required: settings.approvalRequired,
      approvers: settings.approvers,
      hold_expiry_seconds: settings.holdExpirySeconds,
      allow_local_execution: settings.allowLocalExecution,
      updated_at: now,
    };
    const row = await trx
      .insertInto('environments')
      .values({ name: settings.name, ...columns, created_at: now })
      .onConflict((oc) => oc.column('name').doUpdateSet(columns))
      .returning(sql<boolean>`(xmax = 0)`.as('inserted'))
      .executeTakeFirstOrThrow();
    await trx.deleteFrom('environment_repositories').where('environment', '=', settings.name).execute();
    if (settings.repositories.length > 0) {
      await trx.insertInto('environment_repositories').values(settings.repositories.map((repository) => ({ environment: settings.name, repository }))).execute();
    }
    if (variables !== undefined) {
      await trx.deleteFrom('environment_variables').where('environment', '=', settings.name).execute();
      const entries = Object.entries(variables);
      if (entries.length > 0) {
        await trx.insertInto('environment_variables').values(entries.map(([key, value]) => ({ environment: settings.name, key, value, updated_at: now }))).execute();
      }
    }
    return row.inserted;
  });
}

export type DeleteOutcome = { deleted: true } | { deleted: false; reason: 'not_found' } | { deleted: false; reason: 'pending_held_runs'; runIds: string[] };

/**
 * ENV-3: removes the environment, its bindings and variables in one transaction, unless a pending
 * hold references it. Finished hold records keep their history with the environment nulled.
 */
export async function deleteEnvironment(db: Kysely<Schema>, name: string): Promise<DeleteOutcome> {
  return db.transaction().execute(async (trx): Promise<DeleteOutcome> => {
    const row = await trx.selectFrom('environments').select('name').where('name', '=', name).forUpdate().executeTakeFirst();
    if (!row) return { deleted: false, reason: 'not_found' };
    const runIds = await pendingHeldRuns(trx, name);
    if (runIds.length > 0) return { deleted: false, reason: 'pending_held_runs', runIds };
    await trx.deleteFrom('environment_variables').where('environment', '=', name).execute();
    await trx.deleteFrom('environment_repositories').where('environment', '=', name).execute();
    await trx.updateTable('approval_gates').set({ environment: null }).where('environment', '=', name).execute();
    await trx.deleteFrom('environments').where('name', '=', name).execute();
    return { deleted: true };
  });
}

/**
 * Runs with a hold on `name` still pending: by their records, and by the job projection, which is
 * committed with the state that opened the hold (the record follows as an effect just after).
 */
async function pendingHeldRuns(trx: Transaction<Schema>, name: string): Promise<string[]> {
  const recorded = await trx.selectFrom('approval_gates').select('run_id').where('environment', '=', name).where('status', '=', 'pending').execute();
  const projected = await trx
    .selectFrom('jobs')
    .select('run_id')
    .where('status', '=', 'pending')
    .where(sql<string>`waiting_reason->>'kind'`, '=', 'approval')
    .where(sql<string>`waiting_reason->>'environment'`, '=', name)
    .execute();
  return [...new Set([...recorded, ...projected].map((row) => row.run_id))].sort();
}

/** Sets one variable; false when the environment does not exist. */
export async function putVariable(db: Kysely<Schema>, environment: string, key: string, value: string, now: number): Promise<boolean> {
  return db.transaction().execute(async (trx) => {
    const row = await trx.selectFrom('environments').select('name').where('name', '=', environment).forUpdate().executeTakeFirst();
    if (!row) return false;
    await trx
      .insertInto('environment_variables')
      .values({ environment, key, value, updated_at: now })
      .onConflict((oc) => oc.columns(['environment', 'key']).doUpdateSet({ value, updated_at: now }))
      .execute();
    await trx.updateTable('environments').set({ updated_at: now }).where('name', '=', environment).execute();
    return true;
  });
}

export async function deleteVariable(db: Kysely<Schema>, environment: string, key: string): Promise<boolean> {
  const result = await db.deleteFrom('environment_variables').where('environment', '=', environment).where('key', '=', key).executeTakeFirst();
  return Number(result.numDeletedRows) > 0;
}

/**
 * Writes a job's hold record as its chart opened or decided it (at least once, after commit). A
 * decided record is never overwritten, so a late replay of the opening changes nothing.
 */
export async function recordApprovalGate(db: Kysely<Schema>, runId: string, jobKey: string, gate: ApprovalGate): Promise<void> {
  const decision = { status: gate.status, comment: gate.comment, decided_by: gate.decidedBy, decided_at: gate.decidedAt };
  await db
    .insertInto('approval_gates')
    .values({
      ...{ run_id: runId, gate_id: gate.gateId, job_key: jobKey, environment: gate.environment, kind: gate.kind },
      ...{ reason: gate.why, opened_at: gate.openedAt, expires_at: gate.expiresAt, ...decision },
    })
    .onConflict((oc) => oc.columns(['run_id', 'gate_id']).doUpdateSet(decision).where('approval_gates.status', '=', 'pending'))
    .execute();
}

export async function listApprovalGates(db: Db, runId: string, status?: string) {
  let query = db.selectFrom('approval_gates').selectAll().where('run_id', '=', runId).orderBy('opened_at').orderBy('job_key');
  if (status) query = query.where('status', '=', status as 'pending');
  return query.execute();
}

export async function getApprovalGate(db: Db, runId: string, gateId: string) {
  return (await db.selectFrom('approval_gates').selectAll().where('run_id', '=', runId).where('gate_id', '=', gateId).executeTakeFirst()) ?? null;
}
