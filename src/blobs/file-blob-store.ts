import { createHash, randomUUID } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { mkdir, readdir, rename, rm, stat } from 'node:fs/promises';
import { dirname, join, relative, sep } from 'node:path';
import { Transform, type Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { assertBlobKey, BlobTooLargeError, type BlobStore, type StagedBlob } from './blob-store.ts';

/** Counts and hashes what passes; past `maxBytes` it fails the pipeline. */
export function meter(maxBytes: number) {
  const hash = createHash('sha256');
  let sizeBytes = 0;
  const transform = new Transform({
    transform(chunk: Buffer, _encoding, done) {
      sizeBytes += chunk.length;
      if (sizeBytes > maxBytes) return done(new BlobTooLargeError(maxBytes));
      hash.update(chunk);
      done(null, chunk);
    },
  });
  return { transform, result: () => ({ sizeBytes, sha256: hash.digest('hex') }) };
}

/**
 * Objects as files under `<root>/objects/<key>`, staging under `<root>/staging/<id>`; a commit is a
 * rename on the same file system, so an object is whole or absent.
 */
export class FileBlobStore implements BlobStore {
  readonly kind = 'files' as const;
  private readonly objects: string;
  private readonly staging: string;

  constructor(root: string) {
    this.objects = join(root, 'objects');
    this.staging = join(root, 'staging');
  }

  async stage(body: Readable, maxBytes: number): Promise<StagedBlob> {
    await mkdir(this.staging, { recursive: true, mode: 0o700 });
    const stagingId = randomUUID();
    const path = join(this.staging, stagingId);
    const metered = meter(maxBytes);
    try {
      await pipeline(body, metered.transform, createWriteStream(path, { mode: 0o600 }));
    } catch (error) {
      await rm(path, { force: true });
      throw error;
    }
    return { stagingId, ...metered.result() };
  }

  async commit(stagingId: string, key: string): Promise<boolean> {
    assertBlobKey(key);
    const target = join(this.objects, key);
    await mkdir(dirname(target), { recursive: true, mode: 0o700 });
    try {
      await rename(join(this.staging, stagingIdOf(stagingId)), target);
      return true;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return false;
      throw error;
    }
  }

  async discard(stagingId: string): Promise<void> {
    await rm(join(this.staging, stagingIdOf(stagingId)), { force: true });
  }

  async get(key: string): Promise<{ body: Readable; sizeBytes: number } | null> {
    assertBlobKey(key);
    const path = join(this.objects, key);
    const info = await stat(path).catch((error: NodeJS.ErrnoException) => (error.code === 'ENOENT' ? null : Promise.reject(error)));
    if (!info?.isFile()) return null;
    return { body: createReadStream(path), sizeBytes: info.size };
  }

  async delete(key: string): Promise<void> {
    assertBlobKey(key);
    await rm(join(this.objects, key), { force: true });
  }

  async list(prefix: string): Promise<{ key: string; sizeBytes: number }[]> {
    const found: { key: string; sizeBytes: number }[] = [];
    const walk = async (dir: string): Promise<void> => {
      const entries = await readdir(dir, { withFileTypes: true }).catch((error: NodeJS.ErrnoException) => (error.code === 'ENOENT' ? [] : Promise.reject(error)));
      for (const entry of entries) {
        const path = join(dir, entry.name);
        if (entry.isDirectory()) await walk(path);
        else if (entry.isFile()) {
          const key = relative(this.objects, path).split(sep).join('/');
          if (key.startsWith(prefix)) found.push({ key, sizeBytes: (await stat(path)).size });
        }
      }
    };
    await walk(this.objects);
    return found.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  }

  async sweepStaging(olderThan: number): Promise<number> {
    const names = await readdir(this.staging).catch((error: NodeJS.ErrnoException) => (error.code === 'ENOENT' ? [] : Promise.reject(error)));
    let removed = 0;
    for (const name of names) {
      const path = join(this.staging, name);
      if ((await stat(path)).mtimeMs < olderThan) {
        await rm(path, { force: true });
        removed += 1;
      }
    }
    return removed;
  }
}

function stagingIdOf(stagingId: string): string {
  if (!/^[0-9a-f-]{36}$/.test(stagingId)) throw new RangeError(`not a staging id: ${JSON.stringify(stagingId)}`);
  return stagingId;
}
