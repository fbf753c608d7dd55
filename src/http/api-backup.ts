import type { Kysely } from 'kysely';
import { writeBackup } from '../backup/dump.ts';
import type { Schema } from '../db/schema.ts';
import type { Router } from './router.ts';

export interface BackupApiDeps {
  db: Kysely<Schema>;
  /** The data dir whose blob files (and master key, when asked) go in; null with the Postgres blob store. */
  dataDir: string | null;
  now: () => number;
}

/**
 * `GET /api/v1/backup[?withMasterKey=true]`: a backup of the running coordinator's database (one
 * consistent snapshot) and blob files, streamed as it is written (docs/backups.md). A failure mid-way
 * cuts the stream, and a cut file is refused by `switchyard backup` and by a restore.
 */
export function registerBackupRoutes(router: Router, deps: BackupApiDeps): void {
  router.on('GET', '/api/v1/backup', async ({ res, url }) => {
    const withMasterKey = url.searchParams.get('withMasterKey') === 'true';
    res.writeHead(200, { 'content-type': 'application/gzip', 'content-disposition': 'attachment; filename="switchyard.backup"', 'cache-control': 'no-store' });
    await writeBackup({ db: deps.db, dataDir: deps.dataDir, withMasterKey, now: deps.now }, res);
  });
}
