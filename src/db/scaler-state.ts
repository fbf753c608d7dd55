import { randomBytes } from 'node:crypto';
import { sql } from 'kysely';
import type { Kysely } from 'kysely';
import { toJson } from './json.ts';
import type { Schema } from './schema.ts';

export interface StoredScalerState {
  coordinatorId: string;
  machineVersion: number;
  snapshot: unknown;
  updatedAt: number;
}

interface Row {
  coordinator_id: string;
  machine_version: number;
  snapshot: unknown;
  updated_at: string | number;
}

function fromRow(row: Row): StoredScalerState {
  return { coordinatorId: row.coordinator_id, machineVersion: row.machine_version, snapshot: row.snapshot, updatedAt: Number(row.updated_at) };
}

/** The installation id (owner label of every scaler resource), created on first use. */
export async function installationId(db: Kysely<Schema>, now: number): Promise<string> {
  const candidate = `sy-${randomBytes(6).toString('hex')}`;
  await sql`INSERT INTO installation (singleton, id, created_at) VALUES (true, ${candidate}, ${now}) ON CONFLICT (singleton) DO NOTHING`.execute(db);
  const { rows } = await sql<{ id: string }>`SELECT id FROM installation WHERE singleton`.execute(db);
  return rows[0]?.id ?? candidate;
}

export async function loadScalerState(db: Kysely<Schema>, coordinatorId: string): Promise<StoredScalerState | null> {
  const { rows } = await sql<Row>`SELECT * FROM scaler_state WHERE coordinator_id = ${coordinatorId}`.execute(db);
  return rows[0] ? fromRow(rows[0]) : null;
}

/** Stores the snapshot while `epoch` is still this coordinator's; false means fenced. */
export async function saveScalerState(
  db: Kysely<Schema>,
  state: { coordinatorId: string; epoch: number; machineVersion: number; snapshot: unknown; now: number },
): Promise<boolean> {
  const { coordinatorId, epoch, machineVersion, now } = state;
  const snapshot = toJson(state.snapshot);
  const result = await sql`
    INSERT INTO scaler_state (coordinator_id, machine_version, snapshot, updated_at)
    SELECT ${coordinatorId}, ${machineVersion}, ${snapshot}::jsonb, ${now}
    WHERE EXISTS (SELECT 1 FROM coordinators WHERE id = ${coordinatorId} AND epoch = ${epoch})
    ON CONFLICT (coordinator_id) DO UPDATE
      SET machine_version = excluded.machine_version, snapshot = excluded.snapshot, updated_at = excluded.updated_at`.execute(db);
  return Number(result.numAffectedRows ?? 0) === 1;
}

/** Every stored scaler state: which agent ids some coordinator still accounts for. */
export async function listScalerStates(db: Kysely<Schema>): Promise<StoredScalerState[]> {
  const { rows } = await sql<Row>`SELECT * FROM scaler_state ORDER BY coordinator_id`.execute(db);
  return rows.map(fromRow);
}

/** States of other coordinators whose lease has expired (or that have no lease row at all). */
export async function findAbandonedScalerStates(db: Kysely<Schema>, args: { me: string; now: number }): Promise<StoredScalerState[]> {
  const { rows } = await sql<Row>`
    SELECT s.* FROM scaler_state s LEFT JOIN coordinators c ON c.id = s.coordinator_id
    WHERE s.coordinator_id <> ${args.me} AND (c.id IS NULL OR c.lease_until < ${args.now})`.execute(db);
  return rows.map(fromRow);
}

/** Drops an abandoned state once its resources are gone; false when its coordinator came back meanwhile. */
export async function deleteAbandonedScalerState(db: Kysely<Schema>, args: { coordinatorId: string; updatedAt: number; now: number }): Promise<boolean> {
  const result = await sql`
    DELETE FROM scaler_state s WHERE s.coordinator_id = ${args.coordinatorId} AND s.updated_at = ${args.updatedAt}
      AND NOT EXISTS (SELECT 1 FROM coordinators c WHERE c.id = s.coordinator_id AND c.lease_until >= ${args.now})`.execute(db);
  return Number(result.numAffectedRows ?? 0) === 1;
}
