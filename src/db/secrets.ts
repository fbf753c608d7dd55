import { sql } from 'kysely';
import type { Kysely, Transaction } from 'kysely';
import { toJson } from './json.ts';
import type { Schema } from './schema.ts';

/** Every secret query (docs/database.md). Values here are ciphertexts; plaintext never reaches this module. */

export interface SecretRow {
  scope: string;
  key: string;
  ciphertext: string;
  keyVersion: string;
}

export interface SecretListing {
  scope: string;
  key: string;
  createdAt: number;
  updatedAt: number;
}

export async function upsertSecret(db: Kysely<Schema>, row: SecretRow & { now: number }): Promise<'created' | 'updated'> {
  const result = await db
    .insertInto('secrets')
    .values({ scope: row.scope, key: row.key, ciphertext: row.ciphertext, key_version: row.keyVersion, created_at: row.now, updated_at: row.now })
    .onConflict((oc) => oc.columns(['scope', 'key']).doUpdateSet({ ciphertext: row.ciphertext, key_version: row.keyVersion, updated_at: row.now }))
    .returning(sql<boolean>`xmax = 0`.as('inserted'))
    .executeTakeFirstOrThrow();
  return result.inserted ? 'created' : 'updated';
}

export async function deleteSecret(db: Kysely<Schema>, scope: string, key: string): Promise<boolean> {
  const result = await db.deleteFrom('secrets').where('scope', '=', scope).where('key', '=', key).executeTakeFirst();
  return Number(result.numDeletedRows) > 0;
}

/** Every scope that holds at least one secret. */
export async function scopesWithSecrets(db: Kysely<Schema>): Promise<string[]> {
  const rows = await db.selectFrom('secrets').select('scope').distinct().execute();
  return rows.map((row) => row.scope);
}

export async function listSecrets(db: Kysely<Schema>): Promise<SecretListing[]> {
  const rows = await db.selectFrom('secrets').select(['scope', 'key', 'created_at', 'updated_at']).orderBy('scope').orderBy('key').execute();
  return rows.map((r) => ({ scope: r.scope, key: r.key, createdAt: r.created_at, updatedAt: r.updated_at }));
}

export async function secretsInScopes(db: Kysely<Schema>, scopes: readonly string[]): Promise<SecretRow[]> {
  if (scopes.length === 0) return [];
  const rows = await db.selectFrom('secrets').select(['scope', 'key', 'ciphertext', 'key_version']).where('scope', 'in', [...scopes]).execute();
  return rows.map((r) => ({ scope: r.scope, key: r.key, ciphertext: r.ciphertext, keyVersion: r.key_version }));
}

export interface AuditRecord {
  at: number;
  actor: string;
  action: 'put' | 'delete' | 'rotate' | 'resolve' | 'reveal';
  runId?: string;
  jobKey?: string;
  dispatchId?: string;
  scope?: string;
  keys: readonly string[];
  outcome: string;
}

export async function appendAudit(db: Kysely<Schema> | Transaction<Schema>, record: AuditRecord): Promise<void> {
  await db
    .insertInto('secret_audit')
    .values({
      ...{ at: record.at, actor: record.actor, action: record.action, run_id: record.runId ?? null, job_key: record.jobKey ?? null },
      ...{ dispatch_id: record.dispatchId ?? null, scope: record.scope ?? null, keys: toJson([...record.keys]), outcome: record.outcome },
    })
    .execute();
}

export async function listAudit(db: Kysely<Schema>, runId: string) {
  return db.selectFrom('secret_audit').selectAll().where('run_id', '=', runId).orderBy('id').execute();
}

export interface SealedKeyRow {
  publicKey: string;
  privateKey: string;
  keyVersion: string;
}

/**
 * Stores the key rows of runs that have none, in one statement, and answers each run's public key:
 * the one given, or the one already stored (a run's key is made once, whoever asks first).
 */
export async function storeRunKeys(db: Kysely<Schema>, rows: readonly (SealedKeyRow & { runId: string })[], now: number): Promise<Map<string, string>> {
  const values = rows.map((row) => ({ run_id: row.runId, public_key: row.publicKey, private_key: row.privateKey, key_version: row.keyVersion, created_at: now }));
  const inserted = await db.insertInto('run_keys').values(values).onConflict((oc) => oc.column('run_id').doNothing()).returning(['run_id', 'public_key']).execute();
  const stored = new Map(inserted.map((row) => [row.run_id, row.public_key]));
  const others = rows.filter((row) => !stored.has(row.runId)).map((row) => row.runId);
  if (others.length > 0) {
    for (const row of await db.selectFrom('run_keys').select(['run_id', 'public_key']).where('run_id', 'in', others).execute()) stored.set(row.run_id, row.public_key);
  }
  return stored;
}

export async function existingRunKey(db: Kysely<Schema>, runId: string): Promise<SealedKeyRow | null> {
  const row = await db.selectFrom('run_keys').select(['public_key', 'private_key', 'key_version']).where('run_id', '=', runId).executeTakeFirst();
  return row ? { publicKey: row.public_key, privateKey: row.private_key, keyVersion: row.key_version } : null;
}

export interface SecretOutputRow {
  runId: string;
  jobKey: string;
  name: string;
  dispatchId: string;
  agentPublicKey: string;
  encrypted: string;
  createdAt: number;
}

export async function storeSecretOutputs(db: Kysely<Schema>, rows: readonly SecretOutputRow[]): Promise<void> {
  if (rows.length === 0) return;
  const values = rows.map((r) => ({
    ...{ run_id: r.runId, job_key: r.jobKey, name: r.name, dispatch_id: r.dispatchId },
    ...{ agent_public_key: r.agentPublicKey, encrypted: r.encrypted, created_at: r.createdAt },
  }));
  await db
    .insertInto('secret_outputs')
    .values(values)
    .onConflict((oc) =>
      oc.columns(['run_id', 'job_key', 'name']).doUpdateSet((eb) => ({
        dispatch_id: eb.ref('excluded.dispatch_id'),
        agent_public_key: eb.ref('excluded.agent_public_key'),
        encrypted: eb.ref('excluded.encrypted'),
        created_at: eb.ref('excluded.created_at'),
      })),
    )
    .execute();
}

export async function secretOutputsOf(db: Kysely<Schema>, runId: string, jobKeys?: readonly string[]): Promise<SecretOutputRow[]> {
  if (jobKeys !== undefined && jobKeys.length === 0) return [];
  let query = db.selectFrom('secret_outputs').selectAll().where('run_id', '=', runId);
  if (jobKeys !== undefined) query = query.where('job_key', 'in', [...jobKeys]);
  const rows = await query.orderBy('job_key').orderBy('name').execute();
  return rows.map((r) => ({
    ...{ runId: r.run_id, jobKey: r.job_key, name: r.name, dispatchId: r.dispatch_id },
    ...{ agentPublicKey: r.agent_public_key, encrypted: r.encrypted, createdAt: r.created_at },
  }));
}

export async function insertTestUpload(db: Kysely<Schema>, row: SealedKeyRow & { uploadId: string; now: number; expiresAt: number }): Promise<void> {
  await db
    .insertInto('test_uploads')
    .values({ upload_id: row.uploadId, public_key: row.publicKey, private_key: row.privateKey, key_version: row.keyVersion, created_at: row.now, expires_at: row.expiresAt })
    .execute();
}

/** Expired uploads no test run refers to: their keys are of no use any more. */
export async function deleteExpiredUploads(db: Kysely<Schema>, now: number): Promise<number> {
  const result = await db
    .deleteFrom('test_uploads')
    .where('expires_at', '<=', now)
    .where((eb) => eb.not(eb.exists(eb.selectFrom('test_run_secrets').select('run_id').whereRef('test_run_secrets.upload_id', '=', 'test_uploads.upload_id'))))
    .executeTakeFirst();
  return Number(result.numDeletedRows);
}

export async function testUploadOf(db: Kysely<Schema>, uploadId: string): Promise<(SealedKeyRow & { expiresAt: number }) | null> {
  const row = await db.selectFrom('test_uploads').selectAll().where('upload_id', '=', uploadId).executeTakeFirst();
  return row ? { publicKey: row.public_key, privateKey: row.private_key, keyVersion: row.key_version, expiresAt: row.expires_at } : null;
}

export interface TestRunSecretsRow {
  runId: string;
  uploadId: string;
  senderPublicKey: string;
  encryptedSecrets: string;
}

export async function insertTestRunSecrets(db: Kysely<Schema>, row: TestRunSecretsRow & { now: number }): Promise<void> {
  await db
    .insertInto('test_run_secrets')
    .values({ run_id: row.runId, upload_id: row.uploadId, sender_public_key: row.senderPublicKey, encrypted_secrets: row.encryptedSecrets, created_at: row.now })
    .execute();
}

export async function deleteTestRunSecrets(db: Kysely<Schema>, runId: string): Promise<void> {
  await db.deleteFrom('test_run_secrets').where('run_id', '=', runId).execute();
}

export async function testRunSecretsOf(db: Kysely<Schema>, runId: string): Promise<TestRunSecretsRow | null> {
  const row = await db.selectFrom('test_run_secrets').selectAll().where('run_id', '=', runId).executeTakeFirst();
  return row ? { runId: row.run_id, uploadId: row.upload_id, senderPublicKey: row.sender_public_key, encryptedSecrets: row.encrypted_secrets } : null;
}

/** The sealed rows of every table that holds master-key ciphertexts, for a re-encryption in one transaction. */
export const SEALED_TABLES = ['secrets', 'run_keys', 'test_uploads', 'attempt_secrets'] as const;
export type SealedTable = (typeof SEALED_TABLES)[number];

export interface SealedRowRef {
  table: SealedTable;
  /** The row's primary key, also the AAD the ciphertext is bound to. */
  aad: string;
  id: Record<string, string>;
  ciphertext: string;
  keyVersion: string;
}

export async function lockSealedRows(tx: Transaction<Schema>): Promise<SealedRowRef[]> {
  const secrets = await tx.selectFrom('secrets').select(['scope', 'key', 'ciphertext', 'key_version']).forUpdate().execute();
  const runKeys = await tx.selectFrom('run_keys').select(['run_id', 'private_key', 'key_version']).forUpdate().execute();
  const uploads = await tx.selectFrom('test_uploads').select(['upload_id', 'private_key', 'key_version']).forUpdate().execute();
  const attempts = await tx.selectFrom('attempt_secrets').select(['dispatch_id', 'ciphertext', 'key_version']).forUpdate().execute();
  return [
    ...attempts.map((r) => ({ table: 'attempt_secrets' as const, aad: `attempt:${r.dispatch_id}`, id: { dispatch_id: r.dispatch_id }, ciphertext: r.ciphertext, keyVersion: r.key_version })),
    ...secrets.map((r) => ({ table: 'secrets' as const, aad: `${r.scope}:${r.key}`, id: { scope: r.scope, key: r.key }, ciphertext: r.ciphertext, keyVersion: r.key_version })),
    ...runKeys.map((r) => ({ table: 'run_keys' as const, aad: `run-key:${r.run_id}`, id: { run_id: r.run_id }, ciphertext: r.private_key, keyVersion: r.key_version })),
    ...uploads.map((r) => ({ table: 'test_uploads' as const, aad: `upload-key:${r.upload_id}`, id: { upload_id: r.upload_id }, ciphertext: r.private_key, keyVersion: r.key_version })),
  ];
}

export async function rewriteSealedRow(tx: Transaction<Schema>, ref: SealedRowRef, ciphertext: string, keyVersion: string): Promise<void> {
  switch (ref.table) {
    case 'secrets':
      await tx.updateTable('secrets').set({ ciphertext, key_version: keyVersion }).where('scope', '=', ref.id['scope'] ?? '').where('key', '=', ref.id['key'] ?? '').execute();
      return;
    case 'run_keys':
      await tx.updateTable('run_keys').set({ private_key: ciphertext, key_version: keyVersion }).where('run_id', '=', ref.id['run_id'] ?? '').execute();
      return;
    case 'attempt_secrets':
      await tx.updateTable('attempt_secrets').set({ ciphertext, key_version: keyVersion }).where('dispatch_id', '=', ref.id['dispatch_id'] ?? '').execute();
      return;
    case 'test_uploads':
      await tx.updateTable('test_uploads').set({ private_key: ciphertext, key_version: keyVersion }).where('upload_id', '=', ref.id['upload_id'] ?? '').execute();
      return;
  }
}

export async function saveAttemptSecrets(db: Kysely<Schema>, row: { dispatchId: string; runId: string; ciphertext: string; keyVersion: string; now: number }): Promise<void> {
  const values = { dispatch_id: row.dispatchId, run_id: row.runId, ciphertext: row.ciphertext, key_version: row.keyVersion, created_at: row.now };
  await db
    .insertInto('attempt_secrets')
    .values(values)
    .onConflict((oc) => oc.column('dispatch_id').doUpdateSet({ ciphertext: row.ciphertext, key_version: row.keyVersion }))
    .execute();
}

export async function attemptSecretsOf(db: Kysely<Schema>, dispatchId: string): Promise<{ ciphertext: string; keyVersion: string } | null> {
  const row = await db.selectFrom('attempt_secrets').select(['ciphertext', 'key_version']).where('dispatch_id', '=', dispatchId).executeTakeFirst();
  return row ? { ciphertext: row.ciphertext, keyVersion: row.key_version } : null;
}

export async function deleteAttemptSecrets(db: Kysely<Schema>, dispatchId: string): Promise<void> {
  await db.deleteFrom('attempt_secrets').where('dispatch_id', '=', dispatchId).execute();
}
