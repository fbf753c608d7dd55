import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { connectDatabase } from '../../src/db/database.ts';
import { startEmbeddedPostgres, type EmbeddedServer } from '../../src/db/embedded-postgres.ts';
import { migrateToLatest } from '../../src/db/migrate.ts';
import { externalAdminConfig, externalUrl, skipReason, testLog, urlOf, type SharedTestDatabases } from './test-databases.ts';

/** What a test run set up, and how to take it down again. */
export interface TestRunDatabases {
  readonly shared: SharedTestDatabases;
  teardown(): Promise<void>;
}

/**
 * Makes the run's templates: one migrated database on the external Postgres (when it answers; under
 * CI=true it must) and one on an embedded server started for the whole run.
 */
export async function setUpTestDatabases(): Promise<TestRunDatabases> {
  const runTag = randomBytes(3).toString('hex');
  const template = `sy_tpl_${runTag}`;
  const externalTemplate = (await skipReason('external')) === undefined ? await makeExternalTemplate(template) : undefined;
  const dir = await mkdtemp(join(tmpdir(), 'sy-test-run-pg-'));
  let server: EmbeddedServer | undefined;
  try {
    server = await startEmbeddedPostgres(dir, testLog);
    await makeTemplate(server.connection('postgres'), template, urlOf(server.connection('postgres'), template));
  } catch (error) {
    await server?.stop();
    if (externalTemplate !== undefined) await dropTagged(externalAdminConfig(), runTag, template);
    throw error;
  }
  const embeddedServer = server;
  return {
    shared: { runTag, externalTemplate, embedded: { admin: embeddedServer.connection('postgres'), template } },
    teardown: async () => {
      if (externalTemplate !== undefined) await dropTagged(externalAdminConfig(), runTag, template);
      await embeddedServer.stop();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

async function makeExternalTemplate(name: string): Promise<string> {
  await makeTemplate(externalAdminConfig(), name, externalUrl(name));
  return name;
}

/** Creates `name` on the server `admin` reaches, migrates it, and marks it a template no one connects to. */
async function makeTemplate(admin: pg.ClientConfig, name: string, url: string): Promise<void> {
  await query(admin, (client) => client.query(`CREATE DATABASE ${client.escapeIdentifier(name)}`));
  const database = connectDatabase({ connectionString: url }, 'external', testLog);
  try {
    await migrateToLatest(database.db, testLog);
  } finally {
    await database.close();
  }
  await query(admin, (client) => client.query(`ALTER DATABASE ${client.escapeIdentifier(name)} WITH IS_TEMPLATE true ALLOW_CONNECTIONS false`));
}

/** Drops the template and every database of this run a test left behind (a killed file's, say). */
async function dropTagged(admin: pg.ClientConfig, runTag: string, template: string): Promise<void> {
  await query(admin, async (client) => {
    await client.query(`ALTER DATABASE ${client.escapeIdentifier(template)} WITH IS_TEMPLATE false`);
    const { rows } = await client.query<{ datname: string }>(`SELECT datname FROM pg_database WHERE datname LIKE $1 OR datname = $2`, [`sy\\_%\\_${runTag}\\_%`, template]);
    for (const { datname } of rows) await client.query(`DROP DATABASE IF EXISTS ${client.escapeIdentifier(datname)} WITH (FORCE)`);
  });
}

async function query(admin: pg.ClientConfig, fn: (client: pg.Client) => Promise<unknown>): Promise<void> {
  const client = new pg.Client(admin);
  await client.connect();
  try {
    await fn(client);
  } finally {
    await client.end();
  }
}
