import assert from 'node:assert/strict';
import { it } from 'node:test';
import type { Kysely } from 'kysely';
import * as runNumbers from '../../../migrations/019_run_numbers.ts';
import type { Schema } from '../../../src/db/schema.ts';
import { HttpError } from '../../../src/http/respond.ts';
import { resolveRunRef } from '../../../src/http/run-ref.ts';
import { describeEachKind, withTestDatabase } from '../../support/database.ts';

const row = (runId: string, repository: string | null, createdAt = 1) => ({
  ...{ run_id: runId, workflow_name: 'wf', repository, status: 'running', created_at: createdAt, updated_at: createdAt },
  ...{ finished_at: null, failure_reason: null, init_failure: null, input_summary: null },
});

/** The group commit writes a run's row again and again as `INSERT … ON CONFLICT DO UPDATE`. */
async function upsert(db: Kysely<Schema>, runId: string, repository: string, status: string): Promise<void> {
  await db.insertInto('runs').values({ ...row(runId, repository), status }).onConflict((oc) => oc.column('run_id').doUpdateSet({ status })).execute();
}

const numbers = async (db: Kysely<Schema>) =>
  Object.fromEntries((await db.selectFrom('runs').select(['run_id', 'number']).orderBy('run_id').execute()).map((r) => [r.run_id, r.number]));

async function refusal(promise: Promise<unknown>): Promise<{ status: number; reason: string }> {
  const thrown = await promise.then(() => null, (error: unknown) => error);
  assert.ok(thrown instanceof HttpError, `expected an HttpError, got ${String(thrown)}`);
  return { status: thrown.status, reason: thrown.reason ?? '' };
}

await describeEachKind('run numbers per repository, and run references (id, prefix, number)', (kind) => {
  it('numbers each repository from 1, concurrently without a gap or a repeat, and keeps a number through later writes', async () => {
    await withTestDatabase(kind, async ({ db }) => {
      await Promise.all(Array.from({ length: 20 }, (_, n) => db.insertInto('runs').values(row(`a-${String(n).padStart(2, '0')}`, 'acme/app')).execute()));
      await db.insertInto('runs').values([row('b-1', 'acme/lib'), row('n-1', null)]).execute();
      await upsert(db, 'a-03', 'acme/app', 'success');
      await upsert(db, 'b-2', 'acme/lib', 'pending');
      const got = await numbers(db);
      const app = Object.entries(got).filter(([id]) => id.startsWith('a-')).map(([, n]) => n);
      assert.deepEqual([...app].sort((x, y) => Number(x) - Number(y)), Array.from({ length: 20 }, (_, n) => n + 1));
      assert.deepEqual([got['b-1'], got['b-2'], got['n-1']], [1, 2, 1]);
      const before = got['a-03'];
      await upsert(db, 'a-03', 'acme/app', 'failed');
      assert.equal((await numbers(db))['a-03'], before, 'rewriting the row keeps its number');
    });
  });

  it('numbers the runs stored before the migration in the order they were created', async () => {
    await withTestDatabase(kind, async ({ db }) => {
      const migrating = db as unknown as Kysely<unknown>; // a migration sees no schema types
      await runNumbers.down(migrating);
      await db.insertInto('runs').values([row('late', 'acme/app', 30), row('early', 'acme/app', 10), row('middle', 'acme/app', 20), row('other', 'acme/lib', 5)]).execute();
      await runNumbers.up(migrating);
      await db.insertInto('runs').values(row('next', 'acme/app', 40)).execute();
      assert.deepEqual(await numbers(db), { early: 1, late: 3, middle: 2, next: 4, other: 1 });
    });
  });

  it('resolves the full id, a unique prefix, repository#number and a number one repository alone has; refuses the rest clearly', async () => {
    await withTestDatabase(kind, async ({ db }) => {
      const ids = ['1b9d6bcd-bbfd-4b2d-9b5d-ab8dfbbd4bed', '1b9d6bce-0000-4000-8000-000000000000', '6ec0bd7f-11c0-43da-975e-2a8ad9ebae0b'];
      await db.insertInto('runs').values([row(ids[0]!, 'acme/app', 1), row(ids[1]!, 'acme/app', 2), row(ids[2]!, 'acme/lib', 3)]).execute();
      assert.equal(await resolveRunRef(db, ids[2]!), ids[2]);
      assert.equal(await resolveRunRef(db, ids[2]!.toUpperCase()), ids[2], 'ids are lower case');
      assert.equal(await resolveRunRef(db, '6ec0bd7f'), ids[2], 'the 8 characters the runs page shows');
      assert.equal(await resolveRunRef(db, '1b9d6bcd'), ids[0]);
      assert.equal(await resolveRunRef(db, 'acme/app#2'), ids[1]);
      assert.equal(await resolveRunRef(db, 'acme/lib#1'), ids[2]);
      assert.equal(await resolveRunRef(db, '#2'), ids[1], 'only acme/app has a run #2');
      assert.equal(await resolveRunRef(db, '2'), ids[1]);
      const ambiguousPrefix = await refusal(resolveRunRef(db, '1b9d6bc'));
      assert.equal(ambiguousPrefix.status, 409);
      assert.match(ambiguousPrefix.reason, /^1b9d6bc names 2 runs: acme\/app#1 \(1b9d6bcd-.*\), acme\/app#2 \(1b9d6bce-.*\); give the full id or repository#number$/);
      assert.equal((await refusal(resolveRunRef(db, '#1'))).status, 409, 'acme/app and acme/lib both have a #1');
      assert.deepEqual(await refusal(resolveRunRef(db, 'acme/app#9')), { status: 404, reason: 'no run acme/app#9' });
      assert.deepEqual(await refusal(resolveRunRef(db, 'dead')), { status: 404, reason: 'no run dead' });
      assert.equal(await resolveRunRef(db, 'no-such-run'), 'no-such-run', 'not a reference form: the route answers its own 404');
      assert.equal(await resolveRunRef(db, '%_%'), '%_%', 'LIKE patterns are not references');
    });
  });
});
