import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:net';
import pg from 'pg';
import { loadConfig } from '../../../src/config/index.ts';
import { openDatabase } from '../../../src/db/database.ts';
import { EmbeddedPostgresPortInUseError } from '../../../src/db/errors.ts';
import { findFreePort } from '../../../src/db/free-port.ts';
import { tempDir, testLog } from '../../support/database.ts';

function listen(port: number): Promise<Server> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen({ port, host: '127.0.0.1' }, () => resolve(server));
  });
}

describe('SWITCHYARD_EMBEDDED_PG_PORT', () => {
  it('starts the embedded Postgres on the configured port', async () => {
    const port = await findFreePort();
    const config = loadConfig({ SWITCHYARD_DATA_DIR: await tempDir(), SWITCHYARD_EMBEDDED_PG_PORT: String(port) });
    const database = await openDatabase(config, testLog);
    try {
      assert.equal(database.connection.port, port);
      const client = new pg.Client({ ...database.connection, port });
      await client.connect();
      try {
        assert.deepEqual((await client.query('SELECT 1 AS one')).rows, [{ one: 1 }]);
      } finally {
        await client.end();
      }
    } finally {
      await database.close();
    }
  });

  it('refuses a port in use with an error naming the variable, and starts nothing', async () => {
    const port = await findFreePort();
    const blocker = await listen(port);
    try {
      const config = loadConfig({ SWITCHYARD_DATA_DIR: await tempDir(), SWITCHYARD_EMBEDDED_PG_PORT: String(port) });
      await assert.rejects(openDatabase(config, testLog), (error: unknown) => {
        assert.ok(error instanceof EmbeddedPostgresPortInUseError, String(error));
        assert.equal(error.port, port);
        assert.match(error.message, new RegExp(`^SWITCHYARD_EMBEDDED_PG_PORT=${port}: port ${port} on 127\\.0\\.0\\.1 is already in use`));
        return true;
      });
      // The data dir lock was released: the same data dir starts once the port is free.
      await new Promise((resolve) => blocker.close(resolve));
      const database = await openDatabase(config, testLog);
      await database.close();
    } finally {
      if (blocker.listening) blocker.close();
    }
  });
});
