// Child process for embedded.test.ts: opens the embedded database of argv[2], writes a lease row,
// prints "ready <postgres pid>" and waits to be killed.
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { pino } from 'pino';
import { claimCoordinatorLease } from '../../../src/db/coordinator-lease.ts';
import { openDatabase } from '../../../src/db/database.ts';

const dataDir = process.argv[2] ?? '';
const database = await openDatabase({ dataDir, databaseUrl: undefined }, pino({ level: 'silent' }));
await claimCoordinatorLease(database.db, { id: 'child', ttlMs: 1_000, now: 0 });
const postmasterPid = (await readFile(join(dataDir, 'postgres', 'postmaster.pid'), 'utf8')).split('\n')[0];
process.stdout.write(`ready ${postmasterPid}\n`);
setInterval(() => {}, 60_000);
