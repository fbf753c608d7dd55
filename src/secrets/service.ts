import { randomUUID } from 'node:crypto';
import type { Kysely } from 'kysely';
import { z } from 'zod';
import { SECRETS_CHANGED, notifyEveryCoordinator } from '../db/peer-bus.ts';
import * as store from '../db/secrets.ts';
import type { Schema } from '../db/schema.ts';
import { DecryptError, SECRET_OUTPUT_INFO, UPLOAD_INFO, generateX25519, open, openEnvelope, seal } from './crypto.ts';
import type { MasterKeys } from './crypto.ts';
import { RunKeyMaker } from './run-keys.ts';
import { SecretScopeIndex } from './scope-index.ts';

/** Largest secret value accepted (docs/http-api.md#secrets). */
export const MAX_SECRET_BYTES = 64 * 1024;
/** A test upload's key may be used for this long after it was made (SEC-6). */
export const UPLOAD_TTL_MS = 24 * 60 * 60 * 1000;

/** Secrets are asked for but no master key is configured. */
export class SecretsUnavailableError extends Error {
  override readonly name = 'SecretsUnavailableError';
  constructor() {
    super('no master key is configured: set SWITCHYARD_SECRET_KEY (32 bytes, hex or base64)');
  }
}

/** The decrypted test-secrets blob: `{flat:{}, contexts:{<environment>:{}}}`. */
export const testSecretsBlobSchema = z.object({
  flat: z.record(z.string(), z.string()).default({}),
  contexts: z.record(z.string(), z.record(z.string(), z.string())).default({}),
});
export type TestSecretsBlob = z.infer<typeof testSecretsBlobSchema>;

export type UploadLookup = { ok: true; privateKeyDer: Buffer } | { ok: false; status: 404 | 410; reason: string };

export interface SecretServiceDeps {
  db: Kysely<Schema>;
  keys: MasterKeys | null;
  now: () => number;
  /** Who resolutions are audited as: the coordinator sending the dispatch. @default 'coordinator' */
  actor?: string;
}

/**
 * Stored secrets, run and upload keys under the master key (docs/http-api.md#secrets). Plaintext
 * values leave this class only as return values; nothing here logs.
 */
/** Run public keys remembered after their first dispatch: a run's later jobs read no row for it. */
const RUN_KEY_CACHE = 10_000;

export class SecretService {
  private readonly runPublicKeys = new Map<string, Promise<string>>();
  /** Which scopes hold secrets, so a dispatch under none reads no secret rows. */
  readonly scopes = new SecretScopeIndex(() => store.scopesWithSecrets(this.deps.db));
  private readonly runKeys: RunKeyMaker;

  constructor(private readonly deps: SecretServiceDeps) {
    this.runKeys = new RunKeyMaker({ db: deps.db, keys: () => this.keys(), now: () => deps.now() });
  }

  get available(): boolean {
    return this.deps.keys !== null;
  }

  get actor(): string {
    return this.deps.actor ?? 'coordinator';
  }

  get db(): Kysely<Schema> {
    return this.deps.db;
  }

  now(): number {
    return this.deps.now();
  }

  keys(): MasterKeys {
    if (!this.deps.keys) throw new SecretsUnavailableError();
    return this.deps.keys;
  }

  async put(scope: string, key: string, value: string, actor: string): Promise<'created' | 'updated'> {
    const sealed = seal(this.keys(), value, `${scope}:${key}`);
    const now = this.deps.now();
    return this.deps.db.transaction().execute(async (tx) => {
      const outcome = await store.upsertSecret(tx, { scope, key, ciphertext: sealed.ciphertext, keyVersion: sealed.keyVersion, now });
      await store.appendAudit(tx, { at: now, actor, action: 'put', scope, keys: [key], outcome });
      await notifyEveryCoordinator(tx, SECRETS_CHANGED);
      return outcome;
    }).finally(() => this.scopes.invalidate());
  }

  async delete(scope: string, key: string, actor: string): Promise<boolean> {
    const now = this.deps.now();
    return this.deps.db.transaction().execute(async (tx) => {
      const deleted = await store.deleteSecret(tx, scope, key);
      if (deleted) await store.appendAudit(tx, { at: now, actor, action: 'delete', scope, keys: [key], outcome: 'deleted' });
      if (deleted) await notifyEveryCoordinator(tx, SECRETS_CHANGED);
      return deleted;
    }).finally(() => this.scopes.invalidate());
  }

  /** Re-encrypts every master-key ciphertext under the current key, in one transaction; counts by table. */
  async rotate(actor: string): Promise<Record<store.SealedTable, number> & { alreadyCurrent: number }> {
    const keys = this.keys();
    const now = this.deps.now();
    return this.deps.db.transaction().execute(async (tx) => {
      const counts = { secrets: 0, run_keys: 0, test_uploads: 0, attempt_secrets: 0, alreadyCurrent: 0 };
      for (const ref of await store.lockSealedRows(tx)) {
        const plaintext = open(keys, ref, ref.aad);
        const resealed = seal(keys, plaintext, ref.aad);
        if (ref.keyVersion === resealed.keyVersion) counts.alreadyCurrent += 1;
        await store.rewriteSealedRow(tx, ref, resealed.ciphertext, resealed.keyVersion);
        counts[ref.table] += 1;
      }
      await store.appendAudit(tx, { at: now, actor, action: 'rotate', keys: [], outcome: JSON.stringify(counts) });
      return counts;
    });
  }

  /** Opens stored secret rows (throws DecryptError when one does not open). */
  openRows(rows: readonly store.SecretRow[]): { scope: string; key: string; value: string }[] {
    const keys = this.keys();
    return rows.map((row) => ({ scope: row.scope, key: row.key, value: open(keys, row, `${row.scope}:${row.key}`).toString('utf8') }));
  }

  /** Keeps the values sent to an attempt, sealed, so whichever coordinator later holds its agent can mask them. */
  async saveAttemptValues(dispatchId: string, runId: string, values: readonly string[]): Promise<void> {
    const sealed = seal(this.keys(), JSON.stringify(values), `attempt:${dispatchId}`);
    await store.saveAttemptSecrets(this.deps.db, { dispatchId, runId, ...sealed, now: this.deps.now() });
  }

  /** The values sent to an attempt, or null when none were (or no key opens them). */
  async attemptValues(dispatchId: string): Promise<string[] | null> {
    if (!this.deps.keys) return null;
    const row = await store.attemptSecretsOf(this.deps.db, dispatchId);
    return row ? (JSON.parse(open(this.deps.keys, row, `attempt:${dispatchId}`).toString('utf8')) as string[]) : null;
  }

  async dropAttemptValues(dispatchId: string): Promise<void> {
    await store.deleteAttemptSecrets(this.deps.db, dispatchId);
  }

  /**
   * The run's X25519 public key (base64 SPKI DER), made and stored sealed once: asked for as the run
   * is created (so its first dispatch finds it ready) and by every dispatch. A failed attempt is
   * forgotten, so the next ask tries again.
   */
  runPublicKey(runId: string): Promise<string> {
    const known = this.runPublicKeys.get(runId);
    if (known !== undefined) return known;
    const made = this.runKeys.make(runId);
    made.catch(() => this.runPublicKeys.get(runId) === made && this.runPublicKeys.delete(runId));
    if (this.runPublicKeys.size >= RUN_KEY_CACHE) this.runPublicKeys.delete(this.runPublicKeys.keys().next().value as string);
    this.runPublicKeys.set(runId, made);
    return made;
  }

  /** The plaintext secret outputs of `jobKeys` of a run (all of them when omitted), by job and name. */
  async openSecretOutputs(runId: string, jobKeys?: readonly string[]): Promise<{ jobKey: string; name: string; value: string; createdAt: number }[]> {
    const rows = await store.secretOutputsOf(this.deps.db, runId, jobKeys);
    if (rows.length === 0) return [];
    const runKey = await store.existingRunKey(this.deps.db, runId);
    if (!runKey) throw new DecryptError(`run ${runId} has secret outputs but no key pair`);
    const privateKeyDer = open(this.keys(), { ciphertext: runKey.privateKey, keyVersion: runKey.keyVersion }, `run-key:${runId}`);
    return rows.map((row) => ({
      ...{ jobKey: row.jobKey, name: row.name, createdAt: row.createdAt },
      value: openEnvelope(privateKeyDer, row.agentPublicKey, row.encrypted, SECRET_OUTPUT_INFO).toString('utf8'),
    }));
  }

  /** A fresh test upload: its public key for the client, its private key stored sealed, expiring in 24 h (expired unused ones are deleted). */
  async createUpload(): Promise<{ uploadId: string; publicKey: string; expiresAt: number }> {
    const uploadId = randomUUID();
    const pair = generateX25519();
    const sealed = seal(this.keys(), pair.privateKeyDer, `upload-key:${uploadId}`);
    const now = this.deps.now();
    const expiresAt = now + UPLOAD_TTL_MS;
    await store.deleteExpiredUploads(this.deps.db, now);
    await store.insertTestUpload(this.deps.db, { uploadId, publicKey: pair.publicKey, privateKey: sealed.ciphertext, keyVersion: sealed.keyVersion, now, expiresAt });
    return { uploadId, publicKey: pair.publicKey, expiresAt };
  }

  /** The upload's private key; `forRunCreation` refuses an expired upload (a run made in time may still dispatch later). */
  async uploadKey(uploadId: string, forRunCreation: boolean): Promise<UploadLookup> {
    const row = await store.testUploadOf(this.deps.db, uploadId);
    if (!row) return { ok: false, status: 404, reason: `no test upload ${uploadId}` };
    if (forRunCreation && row.expiresAt <= this.deps.now()) return { ok: false, status: 410, reason: `test upload ${uploadId} expired; ask for a new one` };
    return { ok: true, privateKeyDer: open(this.keys(), { ciphertext: row.privateKey, keyVersion: row.keyVersion }, `upload-key:${uploadId}`) };
  }

  /** Decrypts and checks a test-secrets blob; throws DecryptError with a reason (never a value) when it cannot be used. */
  openTestBlob(privateKeyDer: Buffer, senderPublicKey: string, blob: string): TestSecretsBlob {
    const plaintext = openEnvelope(privateKeyDer, senderPublicKey, blob, UPLOAD_INFO);
    let parsed: unknown;
    try {
      parsed = JSON.parse(plaintext.toString('utf8'));
    } catch {
      throw new DecryptError('the decrypted secrets are not JSON');
    }
    const result = testSecretsBlobSchema.safeParse(parsed);
    if (!result.success) throw new DecryptError('the decrypted secrets are not {flat:{<name>:<string>}, contexts:{<environment>:{<name>:<string>}}}');
    return result.data;
  }
}
