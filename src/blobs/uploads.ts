import { randomUUID } from 'node:crypto';
import type { Readable } from 'node:stream';
import type { Kysely } from 'kysely';
import type { Schema } from '../db/schema.ts';
import type { BlobStore, StagedBlob } from './blob-store.ts';
import type { UrlSigner } from './signed-urls.ts';

/** What one upload URL is for: the object it may become, and the attempt that asked. */
export interface UploadGrant {
  purpose: 'user-cache' | 'provenance' | 'source' | 'deps';
  repository: string;
  /** What the bytes become once completed (a cache key, a subject digest): the completion must name it again. */
  target: string;
  runId: string;
  jobKey: string;
  dispatchId: string;
  agentId: string;
  maxBytes: number;
}

export type Received = 'stored' | 'unknown' | 'expired' | 'already uploaded';

/** An upload whose bytes arrived, taken for completion. */
export interface ReceivedUpload extends StagedBlob {
  repository: string;
  runId: string;
  jobKey: string;
}

export const UPLOAD_PATH = '/blobs/uploads/';
export const OBJECT_PATH = '/blobs/objects/';

/**
 * Upload URLs handed to agents (`blob_uploads`): each is for one attempt and one target, expires,
 * and takes one body. The bytes are staged (never readable); the agent's completion message, which
 * names the target and the hash and size it sent, commits them elsewhere (user caches, provenance).
 */
export class Uploads {
  constructor(
    private readonly deps: { db: Kysely<Schema>; store: BlobStore; signer: UrlSigner; now: () => number; ttlMs: number },
  ) {}

  get store(): BlobStore {
    return this.deps.store;
  }

  /** A signed PUT URL for `grant`, valid for the upload TTL. */
  async offer(grant: UploadGrant): Promise<string> {
    const uploadId = randomUUID();
    const now = this.deps.now();
    await this.deps.db
      .insertInto('blob_uploads')
      .values({ upload_id: uploadId, purpose: grant.purpose, repository: grant.repository, target: grant.target, run_id: grant.runId, job_key: grant.jobKey, dispatch_id: grant.dispatchId, agent_id: grant.agentId, max_bytes: grant.maxBytes, expires_at: now + this.deps.ttlMs, created_at: now })
      .execute();
    return this.deps.signer.sign('PUT', `${UPLOAD_PATH}${uploadId}`, this.deps.ttlMs);
  }

  /** A signed GET URL for an object. */
  downloadUrl(blobKey: string): string {
    return this.deps.signer.sign('GET', `${OBJECT_PATH}${encodeURIComponent(blobKey)}`, this.deps.ttlMs);
  }

  /** The body of an upload: staged under its cap, then recorded once; a second body is refused and dropped. */
  async receive(uploadId: string, body: Readable): Promise<Received> {
    const row = await this.deps.db.selectFrom('blob_uploads').select(['max_bytes', 'expires_at', 'uploaded_at']).where('upload_id', '=', uploadId).executeTakeFirst();
    if (!row) return 'unknown';
    if (row.uploaded_at !== null) return 'already uploaded';
    if (Number(row.expires_at) < this.deps.now()) return 'expired';
    const staged = await this.deps.store.stage(body, Number(row.max_bytes));
    const { numUpdatedRows } = await this.deps.db
      .updateTable('blob_uploads')
      .set({ staging_id: staged.stagingId, size_bytes: staged.sizeBytes, sha256: staged.sha256, uploaded_at: this.deps.now() })
      .where('upload_id', '=', uploadId)
      .where('uploaded_at', 'is', null)
      .executeTakeFirst();
    if (Number(numUpdatedRows) === 1) return 'stored';
    await this.deps.store.discard(staged.stagingId);
    return 'already uploaded';
  }

  /**
   * The upload `dispatchId` made for `purpose` and `target`, if its bytes arrived: taken (its row
   * goes), so it completes once. Null when there is none, or none that arrived.
   */
  async take(dispatchId: string, purpose: UploadGrant['purpose'], target: string): Promise<ReceivedUpload | null> {
    const row = await this.deps.db
      .deleteFrom('blob_uploads')
      .where('dispatch_id', '=', dispatchId)
      .where('purpose', '=', purpose)
      .where('target', '=', target)
      .where('uploaded_at', 'is not', null)
      .returning(['staging_id', 'size_bytes', 'sha256', 'repository', 'run_id', 'job_key'])
      .executeTakeFirst();
    if (!row?.staging_id || row.sha256 === null || row.size_bytes === null) return null;
    return { stagingId: row.staging_id, sizeBytes: Number(row.size_bytes), sha256: row.sha256, repository: row.repository, runId: row.run_id, jobKey: row.job_key };
  }

  /**
   * Makes a taken upload the object `blobKey`, kept only if `record` writes the row that refers to it
   * (false: such a row was there already, and the object goes again). Returns whether it was kept.
   */
  async keep(upload: StagedBlob, blobKey: string, record: () => Promise<boolean>): Promise<boolean> {
    await this.deps.store.commit(upload.stagingId, blobKey);
    if (await record()) return true;
    await this.deps.store.delete(blobKey);
    return false;
  }

  /** Uploads past their expiry go, with what they staged. */
  async sweep(): Promise<number> {
    const expired = await this.deps.db.deleteFrom('blob_uploads').where('expires_at', '<', this.deps.now()).returning('staging_id').execute();
    for (const row of expired) if (row.staging_id) await this.deps.store.discard(row.staging_id);
    return expired.length;
  }
}
