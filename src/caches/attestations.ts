import { randomUUID } from 'node:crypto';
import type { Kysely } from 'kysely';
import type { Schema } from '../db/schema.ts';
import type { Uploads } from '../blobs/uploads.ts';
import type { CacheCaller } from './user-cache.ts';

/** A provenance bundle is a signed JSON statement: small. */
export const MAX_BUNDLE_BYTES = 16 * 1024 * 1024;

export interface AttestationView {
  id: number;
  jobKey: string;
  subjectName: string;
  subjectDigest: string;
  mediaType: string;
  sizeBytes: number;
  sha256: string;
  createdAt: number;
}

/**
 * Provenance (`ctx.attestProvenance`; docs/blobs.md#provenance): the agent asks for an upload URL
 * for a subject digest, PUTs the bundle, then names the subject; the bundle is kept with the run
 * and listed with it (API, CLI, runs page), downloadable by an administrator.
 */
export class Attestations {
  constructor(private readonly deps: { db: Kysely<Schema>; uploads: Uploads; now: () => number }) {}

  beginUpload(caller: CacheCaller, subjectDigest: string): Promise<string> {
    return this.deps.uploads.offer({ purpose: 'provenance', target: subjectDigest.toLowerCase(), maxBytes: MAX_BUNDLE_BYTES, ...caller });
  }

  async complete(caller: CacheCaller, subject: { name: string; digest: string; mediaType: string }): Promise<'recorded' | 'no upload'> {
    const upload = await this.deps.uploads.take(caller.dispatchId, 'provenance', subject.digest.toLowerCase());
    if (!upload) return 'no upload';
    const blobKey = `provenance/${caller.runId}/${randomUUID()}`;
    await this.deps.uploads.store.commit(upload.stagingId, blobKey);
    await this.deps.db
      .insertInto('attestations')
      .values({ run_id: caller.runId, job_key: caller.jobKey, subject_name: subject.name, subject_digest: subject.digest.toLowerCase(), media_type: subject.mediaType, blob_key: blobKey, size_bytes: upload.sizeBytes, sha256: upload.sha256, created_at: this.deps.now() })
      .execute();
    return 'recorded';
  }
}

export async function listAttestations(db: Kysely<Schema>, runId: string): Promise<AttestationView[]> {
  const rows = await db.selectFrom('attestations').selectAll().where('run_id', '=', runId).orderBy('id').execute();
  return rows.map((row) => ({
    ...{ id: Number(row.id), jobKey: row.job_key, subjectName: row.subject_name, subjectDigest: row.subject_digest, mediaType: row.media_type },
    ...{ sizeBytes: Number(row.size_bytes), sha256: row.sha256, createdAt: Number(row.created_at) },
  }));
}

export async function attestationBlobKey(db: Kysely<Schema>, runId: string, id: number): Promise<string | null> {
  const row = await db.selectFrom('attestations').select('blob_key').where('run_id', '=', runId).where('id', '=', id).executeTakeFirst();
  return row?.blob_key ?? null;
}
