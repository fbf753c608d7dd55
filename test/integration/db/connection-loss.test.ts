import assert from 'node:assert/strict';
import { it } from 'node:test';
import { sql } from 'kysely';
import { describeEachKind, withTestDatabase } from '../../support/database.ts';

/** Found by the chaos suite: a Postgres connection reset crashed a coordinator (unhandled 'error'). */
await describeEachKind('database connection loss', (kind) => {
  it('a connection reset while a client is checked out fails its next query and leaves the process running', () =>
    withTestDatabase(kind, async ({ db }) => {
      const outcome = await db
        .transaction()
        .execute(async (trx) => {
          const { rows } = await sql<{ pid: number }>`SELECT pg_backend_pid() AS pid`.execute(trx);
          await sql`SELECT pg_terminate_backend(${rows[0]?.pid})`.execute(db);
          await new Promise((resolve) => setTimeout(resolve, 200));
          await sql`SELECT 1`.execute(trx);
          return 'survived';
        })
        .catch((error: unknown) => `failed: ${(error as Error).message}`);
      assert.match(outcome, /^failed: /, 'the transaction reports the lost connection');
      const { rows } = await sql<{ one: number }>`SELECT 1 AS one`.execute(db);
      assert.equal(rows[0]?.one, 1, 'the pool hands out a fresh connection afterwards');
    }));
});
