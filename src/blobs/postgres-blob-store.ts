import { randomUUID } from 'node:crypto';
import { Readable, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { sql, type Kysely } from 'kysely';
import type { Schema } from '../db/schema.ts';
import { assertBlobKey, type BlobStore, type StagedBlob } from './blob-store.ts';
import { meter } from './file-blob-store.ts';

/** Rows of this size: one is in memory at a time, on the way in and on the way out. */
export const CHUNK_BYTES = 1024 * 1024;

/**
 * Objects in Postgres, which every coordinator already shares: one `blobs` row per object and its
 * bytes in `blob_chunks` of 1 MiB, written and read one chunk at a time (never a whole object in
 * memory). A staged object has a `staging_id` and no key; the commit gives it its key in one
 * statement, so a reader sees the old object or the new, whole.
 */
export class PostgresBlobStore implements BlobStore {
  readonly kind = 'postgres' as const;

  constructor(
    private readonly db: Kysely<Schema>,
    private readonly now: () => number,
  ) {}

  async stage(body: Readable, maxBytes: number): Promise<StagedBlob> {
    const stagingId = randomUUID();
    const { id } = await this.db.insertInto('blobs').values({ staging_id: stagingId, size_bytes: 0, sha256: null, created_at: this.now() }).returning('id').executeTakeFirstOrThrow();
    const metered = meter(maxBytes);
    try {
      await pipeline(body, metered.transform, this.chunkWriter(id));
    } catch (error) {
      await this.db.deleteFrom('blobs').where('id', '=', id).execute();
      throw error;
    }
    const result = metered.result();
    await this.db.updateTable('blobs').set({ size_bytes: result.sizeBytes, sha256: result.sha256 }).where('id', '=', id).execute();
    return { stagingId, ...result };
  }

  /** Gathers the stream into chunks of CHUNK_BYTES, each one INSERT. */
  private chunkWriter(blobId: number): Writable {
    let pending: Buffer[] = [];
    let pendingBytes = 0;
    let seq = 0;
    const flush = async (all: boolean) => {
      while (pendingBytes >= CHUNK_BYTES || (all && pendingBytes > 0)) {
        const joined = Buffer.concat(pending);
        const data = joined.subarray(0, CHUNK_BYTES);
        const rest = joined.subarray(data.length);
        pending = rest.length > 0 ? [rest] : [];
        pendingBytes = rest.length;
        await this.db.insertInto('blob_chunks').values({ blob_id: blobId, seq: seq++, data }).execute();
      }
    };
    return new Writable({
      write(chunk: Buffer, _encoding, done) {
        pending.push(chunk);
        pendingBytes += chunk.length;
        flush(false).then(() => done(), done);
      },
      final(done) {
        flush(true).then(() => done(), done);
      },
    });
  }

  async commit(stagingId: string, key: string): Promise<boolean> {
    assertBlobKey(key);
    return this.db.transaction().execute(async (trx) => {
      const staged = await trx.selectFrom('blobs').select('id').where('staging_id', '=', stagingId).forUpdate().executeTakeFirst();
      if (!staged) return false;
      await trx.deleteFrom('blobs').where('key', '=', key).execute();
      await trx.updateTable('blobs').set({ key, staging_id: null }).where('id', '=', staged.id).execute();
      return true;
    });
  }

  async discard(stagingId: string): Promise<void> {
    await this.db.deleteFrom('blobs').where('staging_id', '=', stagingId).execute();
  }

  async get(key: string): Promise<{ body: Readable; sizeBytes: number } | null> {
    assertBlobKey(key);
    const row = await this.db.selectFrom('blobs').select(['id', 'size_bytes']).where('key', '=', key).executeTakeFirst();
    if (!row) return null;
    const db = this.db;
    let seq = 0;
    const body = new Readable({
      read() {
        db.selectFrom('blob_chunks')
          .select('data')
          .where('blob_id', '=', row.id)
          .where('seq', '=', seq++)
          .executeTakeFirst()
          .then((chunk) => this.push(chunk ? chunk.data : null), (error: unknown) => this.destroy(error instanceof Error ? error : new Error(String(error))));
      },
    });
    return { body, sizeBytes: Number(row.size_bytes) };
  }

  async delete(key: string): Promise<void> {
    assertBlobKey(key);
    await this.db.deleteFrom('blobs').where('key', '=', key).execute();
  }

  async list(prefix: string): Promise<{ key: string; sizeBytes: number }[]> {
    const rows = await this.db
      .selectFrom('blobs')
      .select(['key', 'size_bytes'])
      .where('key', 'is not', null)
      .where(sql<boolean>`starts_with(key, ${prefix})`)
      .orderBy(sql`key collate "C"`)
      .execute();
    return rows.map((row) => ({ key: row.key ?? '', sizeBytes: Number(row.size_bytes) }));
  }

  async sweepStaging(olderThan: number): Promise<number> {
    const { numDeletedRows } = await this.db.deleteFrom('blobs').where('staging_id', 'is not', null).where('created_at', '<', olderThan).executeTakeFirst();
    return Number(numDeletedRows);
  }
}
