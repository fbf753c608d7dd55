/** One retention pass over every ended run, in its own process, so a test can kill -9 it part-way. */
import { Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';
import { pino } from 'pino';
import { FileBlobStore } from '../../../src/blobs/file-blob-store.ts';
import type { Schema } from '../../../src/db/schema.ts';
import { RunArchives } from '../../../src/retention/archive.ts';
import { runRetentionPass } from '../../../src/retention/pass.ts';

const [databaseUrl, blobRoot] = process.argv.slice(2) as [string, string];
const db = new Kysely<Schema>({ dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString: databaseUrl, max: 2 }) }) });
await runRetentionPass({ db, archives: new RunArchives(new FileBlobStore(blobRoot)), now: Date.now, log: pino({ level: 'silent' }) }, { runsOlderThanMs: 0, deliveriesOlderThanMs: 0 }, { dryRun: false });
await db.destroy();
