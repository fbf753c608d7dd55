import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { after, describe, it } from 'node:test';
import { Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';
import { findFreePort } from '../../../src/db/free-port.ts';
import type { Schema } from '../../../src/db/schema.ts';
import { resolveDispatchSecrets, type ResolveTarget } from '../../../src/secrets/resolve.ts';
import { SecretService } from '../../../src/secrets/service.ts';

/** A database nobody listens for: every query fails the way a reset or refused connection does. */
async function unreachableDatabase(): Promise<Kysely<Schema>> {
  const port = await findFreePort();
  return new Kysely<Schema>({ dialect: new PostgresDialect({ pool: new pg.Pool({ host: '127.0.0.1', port, user: 'nobody', connectionTimeoutMillis: 2_000 }) }) });
}

const target: ResolveTarget = {
  ...{ runId: randomUUID(), jobKey: 'build', dispatchId: randomUUID() },
  source: { repository: 'acme/app', repoUrl: null, ref: 'refs/heads/main', sha: 'a'.repeat(40), provider: 'api', event: null, workflow: { name: 'wf', jobs: [] } },
  job: { baseName: 'build', matrix: null, initFor: null, upstream: null, resolved: null },
};

describe("a dispatch's secrets when the database fails for a moment", () => {
  const opened: Kysely<Schema>[] = [];
  after(async () => {
    for (const db of opened) await db.destroy();
  });

  it('the resolution throws (the dispatch is tried again) instead of failing the job secret_resolution', async () => {
    const db = await unreachableDatabase();
    opened.push(db);
    const service = new SecretService({ db, keys: { current: randomBytes(32), old: null }, now: Date.now });
    await assert.rejects(resolveDispatchSecrets(service, () => Promise.resolve(false), target), /ECONNREFUSED|connect/);
  });
});
