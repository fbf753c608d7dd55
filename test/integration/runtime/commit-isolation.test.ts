import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { Writable } from 'node:stream';
import { it } from 'node:test';
import { sql, type Kysely } from 'kysely';
import { pino } from 'pino';
import { Registry } from 'prom-client';
import { CommitGaveUpError, RunNotOwnedError, RunNotStorableError } from '../../../actors/runs/errors.ts';
import type { CommitRetryPolicy } from '../../../actors/runs/group-commit.ts';
import { createRuntimeMetrics } from '../../../actors/runs/metrics.ts';
import { systemClock } from '../../../actors/clock.ts';
import type { IncomingRunEvent } from '../../../actors/runs/supervisor.ts';
import { Supervisor } from '../../../actors/runs/supervisor.ts';
import type { SupervisorOptions } from '../../../actors/runs/supervisor.types.ts';
import { claimCoordinatorLease } from '../../../src/db/coordinator-lease.ts';
import { readJournal } from '../../../src/db/journal.ts';
import { reclaimOwnRuns } from '../../../src/db/reclaim.ts';
import { listOwnedActiveRuns } from '../../../src/db/restore.ts';
import { createRunStore } from '../../../src/db/run-store.ts';
import type { Schema } from '../../../src/db/schema.ts';
import { describeEachKind, holdRowLocks, withTestDatabase } from '../../support/database.ts';
import { eventually, planFor, waitingWorkflow } from '../../support/runtime.ts';

// Regression (one bad entry stalls every write): a poisoned group-commit entry fails only its run.

const ME = 'coord-iso';
const FAST: CommitRetryPolicy = { attempts: 3, baseMs: 5, maxMs: 20 };

/**
 * Journal rows whose event `reason` (or run id) reads `poison-<sqlstate>` always fail with that
 * SQLSTATE; `flaky-<sqlstate>-<n>` fail the first n times (a sequence survives the rollback).
 */
async function installPoison(db: Kysely<Schema>): Promise<void> {
  await sql`CREATE SEQUENCE poison_hits`.execute(db);
  await sql`
    CREATE FUNCTION poison_event() RETURNS trigger LANGUAGE plpgsql AS $$
    DECLARE spec text := coalesce(NEW.event->>'reason', NEW.run_id);
    BEGIN
      IF spec LIKE 'poison-%' OR (spec LIKE 'flaky-%' AND nextval('poison_hits') <= split_part(spec, '-', 3)::int) THEN
        RAISE EXCEPTION 'test poison %', spec USING ERRCODE = split_part(spec, '-', 2);
      END IF;
      RETURN NEW;
    END $$`.execute(db);
  await sql`CREATE TRIGGER poison BEFORE INSERT ON run_events FOR EACH ROW EXECUTE FUNCTION poison_event()`.execute(db);
}

async function startSupervisor(db: Kysely<Schema>, retry: CommitRetryPolicy = FAST, effects: Pick<SupervisorOptions, 'onSubmitted' | 'onNotCommitted'> = {}) {
  await installPoison(db);
  const { epoch } = await claimCoordinatorLease(db, { id: ME, ttlMs: 600_000, now: Date.now() });
  const lines: { msg: string; batchSize?: number; outcome?: string }[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      lines.push(JSON.parse(chunk.toString()) as (typeof lines)[number]);
      done();
    },
  });
  const metrics = createRuntimeMetrics(new Registry());
  const supervisor = new Supervisor({
    store: createRunStore(db, { coordinatorId: ME, epoch: () => epoch }, systemClock),
    ...{ clock: systemClock, log: pino({ level: 'info' }, sink), metrics, maxBatch: 100, batching: true },
    executeEffects: () => undefined,
    ...effects,
    onFenced: (error) => assert.fail(error),
    commitRetry: retry,
  });
  return { supervisor, metrics, lines, epoch };
}

const create = (supervisor: Supervisor, runId: string, timeoutMs?: number) =>
  supervisor.createRun({ input: planFor(runId, waitingWorkflow('wf', timeoutMs ? { timeoutMs } : {})), repository: 'acme/app', inputSummary: { runId } });
const cancel = (reason: string): IncomingRunEvent => ({ type: 'run.cancel', reason, force: false, by: 'test' });

async function runRow(db: Kysely<Schema>, runId: string) {
  return db.selectFrom('runs').select(['status', 'failure_reason', 'finished_at']).where('run_id', '=', runId).executeTakeFirst();
}

async function counter(metric: { get(): Promise<{ values: { value: number; labels: Record<string, unknown> }[] }> }, outcome?: string): Promise<number> {
  const { values } = await metric.get();
  return values.filter((v) => outcome === undefined || v.labels['outcome'] === outcome).reduce((sum, v) => sum + v.value, 0);
}

await describeEachKind('group commit isolation', (kind) => {
  it('a poisoned entry fails only its run, with its reason; the rest of its batch commits', () =>
    withTestDatabase(kind, async ({ db }) => {
      const { supervisor, lines, metrics } = await startSupervisor(db);
      const good = Array.from({ length: 5 }, () => randomUUID());
      const poisoned = `poison-22023-${randomUUID()}`;
      const results = await Promise.allSettled([...good, poisoned].map((id) => create(supervisor, id)));
      assert.deepEqual(results.slice(0, 5).map((r) => r.status), Array(5).fill('fulfilled'));
      const failure = results[5];
      assert.ok(failure?.status === 'rejected' && failure.reason instanceof RunNotStorableError, failure?.status);
      assert.match(failure.reason.reason, /could not be stored.*22023.*test poison/);
      assert.ok(lines.some((l) => l.msg === 'commit failed; committing its entries one by one' && l.batchSize === 6), 'they shared one batch');
      for (const id of good) assert.equal((await runRow(db, id))?.status, 'pending');
      const row = await runRow(db, poisoned);
      assert.equal(row?.status, 'failed');
      assert.match(row?.failure_reason ?? '', /^its state could not be stored: .*22023/);
      assert.ok(row?.finished_at, 'a failed run is finished');
      const snapshot = await db.selectFrom('run_snapshots').select(['status', 'snapshot']).where('run_id', '=', poisoned).executeTakeFirstOrThrow();
      assert.equal(snapshot.status, 'failed');
      assert.equal((snapshot.snapshot as { status: string }).status, 'error', 'restore never takes it for an active actor');
      assert.equal(supervisor.owns(poisoned), false);
      assert.equal(supervisor.size, 5);
      assert.deepEqual((await listOwnedActiveRuns(db, { coordinatorId: ME })).sort(), [...good].sort());
      assert.equal(await counter(metrics.commitGiveUps, 'failed'), 1);
      supervisor.stopAll();
    }));

  it('the effects of an entry are shown when it is queued, before it commits, and taken back when it is not stored', () =>
    withTestDatabase(kind, async ({ db }) => {
      const seen: string[] = [];
      const describe = (what: string) => (effects: { runId: string; kind: string }[]) => seen.push(`${what} ${effects.map((e) => `${e.runId.split('-')[0]}:${e.kind}`).join(',')}`);
      const { supervisor } = await startSupervisor(db, FAST, { onSubmitted: describe('queued'), onNotCommitted: describe('not stored') });
      await create(supervisor, `good-${randomUUID()}`);
      await assert.rejects(create(supervisor, `poison-22023-${randomUUID()}`), RunNotStorableError);
      assert.deepEqual(seen, ['queued good:requestPlacement', 'queued poison:requestPlacement', 'not stored poison:requestPlacement']);
      supervisor.stopAll();
    }));

  it('an existing run whose final event cannot be stored is failed: deadlines dropped, jobs cancelled, never reclaimed', () =>
    withTestDatabase(kind, async ({ db }) => {
      const { supervisor, epoch } = await startSupervisor(db);
      const runId = randomUUID();
      await create(supervisor, runId, 60_000);
      assert.ok((await db.selectFrom('timers').select('deadline_id').where('run_id', '=', runId).execute()).length > 0);
      const seqs = (await readJournal(db, runId)).map((e) => e.seq);
      await assert.rejects(supervisor.send(runId, cancel('poison-22P02')), RunNotStorableError);
      assert.equal(supervisor.owns(runId), false);
      assert.equal((await runRow(db, runId))?.status, 'failed');
      assert.deepEqual((await readJournal(db, runId)).map((e) => e.seq), seqs, 'the journal keeps what was durable');
      assert.equal((await db.selectFrom('timers').select('deadline_id').where('run_id', '=', runId).execute()).length, 0);
      const jobs = await db.selectFrom('jobs').select('status').where('run_id', '=', runId).execute();
      assert.deepEqual(jobs.map((j) => j.status), ['cancelled']);
      assert.deepEqual(await reclaimOwnRuns(db, { me: ME, myEpoch: epoch + 1 }), [], 'a restart does not bring it back');
      const restored = supervisor.restore(await createRunStore(db, { coordinatorId: ME, epoch: () => epoch }, systemClock).loadRuns([runId]));
      assert.deepEqual(restored.restored, []);
      supervisor.stopAll();
    }));

  it('a value JSON cannot hold fails its run at submit, before the database (a BigInt, a cycle)', () =>
    withTestDatabase(kind, async ({ db }) => {
      const { supervisor } = await startSupervisor(db);
      const bigint = randomUUID();
      const other = randomUUID();
      const [bad, ok] = await Promise.allSettled([
        supervisor.createRun({ input: planFor(bigint, waitingWorkflow('wf')), repository: null, inputSummary: { size: 10n } }),
        create(supervisor, other),
      ]);
      assert.equal(ok?.status, 'fulfilled');
      assert.ok(bad?.status === 'rejected' && bad.reason instanceof RunNotStorableError);
      assert.match((await runRow(db, bigint))?.failure_reason ?? '', /input summary at seq 0 cannot be stored as JSON: it holds a BigInt/);
      const cyclic: Record<string, unknown> = {};
      cyclic['self'] = cyclic;
      const withCycle: IncomingRunEvent = Object.assign(cancel('x'), { detail: cyclic });
      await assert.rejects(supervisor.send(other, withCycle), RunNotStorableError);
      assert.match((await runRow(db, other))?.failure_reason ?? '', /event at seq \d+ cannot be stored as JSON: it holds a cycle/);
      assert.equal(supervisor.size, 0);
      supervisor.stopAll();
    }));

  it('a transient error is retried with backoff and then succeeds', () =>
    withTestDatabase(kind, async ({ db }) => {
      const { supervisor, metrics, lines } = await startSupervisor(db);
      const runId = `flaky-40001-2-${randomUUID()}`;
      await create(supervisor, runId);
      assert.equal((await runRow(db, runId))?.status, 'pending');
      assert.equal(await counter(metrics.commitRetries), 2);
      assert.equal(lines.filter((l) => l.msg === 'commit failed; retrying').length, 2);
      assert.equal(await counter(metrics.commitGiveUps), 0);
      supervisor.stopAll();
    }));

  it('a transient error that persists past the bound: failed when other writes succeed, released (and restored later) when none does', () =>
    withTestDatabase(kind, async ({ db }) => {
      const { supervisor, metrics } = await startSupervisor(db);
      const stuck = `flaky-40P01-1000-${randomUUID()}`;
      const others = [randomUUID(), randomUUID()];
      const results = await Promise.allSettled([stuck, ...others].map((id) => create(supervisor, id)));
      assert.ok(results[0]?.status === 'rejected' && results[0].reason instanceof RunNotStorableError, 'failed: the fault is its own');
      assert.match((await runRow(db, stuck))?.failure_reason ?? '', /40P01/);
      assert.deepEqual(results.slice(1).map((r) => r.status), ['fulfilled', 'fulfilled'], 'the others were not blocked');

      const [alone] = others as [string, string];
      const seq = (await readJournal(db, alone)).at(-1)?.seq;
      const given = await supervisor.send(alone, cancel('flaky-08006-1000')).then(() => null, (error: unknown) => error);
      assert.ok(given instanceof CommitGaveUpError && given.restorable, String(given));
      assert.equal(supervisor.owns(alone), false, 'released: it left memory, nothing was stored');
      assert.equal((await runRow(db, alone))?.status, 'pending');
      assert.equal(await counter(metrics.commitGiveUps, 'released'), 1);
      await create(supervisor, randomUUID());
      await eventually(() => supervisor.owns(alone), 5_000, 'the released run to be restored after a commit succeeded');
      assert.equal((await readJournal(db, alone)).at(-1)?.seq, seq);
      supervisor.stopAll();
    }));

  it('a finished run stays in memory, refusing events, until its final entry is durable', () =>
    withTestDatabase(kind, async ({ db }) => {
      const { supervisor } = await startSupervisor(db);
      const runId = randomUUID();
      await create(supervisor, runId);
      // A writer holding the coordinator row makes the commit's FOR SHARE wait: the final entry is in flight.
      const lock = await holdRowLocks(db, sql`SELECT 1 FROM coordinators WHERE id = ${ME} FOR UPDATE`);
      const finishing = supervisor.send(runId, cancel('done'));
      try {
        await eventually(async () => {
          const { rows } = await sql<{ n: number }>`SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`.execute(db);
          return (rows[0]?.n ?? 0) > 0;
        }, 5_000, 'the final commit to wait on the lock');
        assert.equal(supervisor.owns(runId), true, 'still in memory while its final entry is not durable');
        await assert.rejects(supervisor.send(runId, cancel('late')), RunNotOwnedError);
      } finally {
        lock.release();
        await lock.released;
      }
      await finishing;
      assert.equal(supervisor.owns(runId), false, 'retired once durable');
      assert.equal((await runRow(db, runId))?.status, 'cancelled');
      supervisor.stopAll();
    }));
});
