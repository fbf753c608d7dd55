import assert from 'node:assert/strict';
import { after as afterAll, describe, it } from 'node:test';
import pg from 'pg';
import { DATABASE_KINDS, skipReason } from '../support/database.ts';
import { after, sharedDatabaseUrl, startCoordinatorProcess, stopProcess } from '../support/processes.ts';
import type { CoordinatorProcess } from '../support/processes.ts';
import { eventually, waitingWorkflow } from '../support/runtime.ts';

const LEASE = { SWITCHYARD_LEASE_RENEW_MS: '200', SWITCHYARD_LEASE_TTL_MS: '1000' };
/** A lease far longer than any wait below: what ends it early is the process's liveness lock. */
const LONG_LEASE = { SWITCHYARD_LEASE_RENEW_MS: '200', SWITCHYARD_LEASE_TTL_MS: '120000' };

afterAll(async () => {
  for (const cleanup of after.splice(0)) await cleanup();
});

async function createRuns(coordinator: CoordinatorProcess, count: number, timeoutMs: number): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < count; i++) {
    const workflow = waitingWorkflow(`wf-${i}`, { timeoutMs, jobs: ['build', 'test'] });
    const res = await coordinator.api('/api/v1/runs', { method: 'POST', body: JSON.stringify({ workflow, repository: 'acme/app' }) });
    assert.equal(res.status, 201, await res.clone().text());
    ids.push(((await res.json()) as { runId: string }).runId);
  }
  return ids;
}

async function journals(db: pg.Client, runIds: string[]) {
  const { rows } = await db.query<{ run_id: string; seq: number; event: { type: string; dueAt?: number }; received_at: string }>(
    'select run_id, seq, event, received_at from run_events where run_id = any($1) order by run_id, seq',
    [runIds],
  );
  const byRun = new Map<string, typeof rows>();
  for (const row of rows) byRun.set(row.run_id, [...(byRun.get(row.run_id) ?? []), row]);
  return byRun;
}

async function allFinal(db: pg.Client, runIds: string[]): Promise<boolean> {
  const { rows } = await db.query<{ n: number }>(
    "select count(*)::int as n from runs where run_id = any($1) and status in ('success','failed','cancelled')",
    [runIds],
  );
  return rows[0]?.n === runIds.length;
}

function assertJournalsExact(byRun: Map<string, { seq: number; event: { type: string; dueAt?: number }; received_at: string }[]>, runIds: string[]) {
  for (const runId of runIds) {
    const events = byRun.get(runId) ?? [];
    assert.deepEqual(events.map((e) => e.seq), events.map((_, i) => i), `run ${runId}: contiguous journal, nothing lost or doubled`);
    const fired = events.filter((e) => e.event.type === 'timer.workflow.expired');
    assert.equal(fired.length, 1, `run ${runId}: the workflow deadline fired exactly once`);
    assert.ok(Number(fired[0]?.received_at) >= (fired[0]?.event.dueAt ?? Infinity), 'never before its time');
  }
}

for (const kind of DATABASE_KINDS) {
  describe(`coordinator failover (${kind} Postgres, real processes)`, { skip: await skipReason(kind) }, () => {
    it('kill -9 of the owner mid-run: a second coordinator takes over and every run reaches a final state', async () => {
      const databaseUrl = await sharedDatabaseUrl(kind);
      const db = new pg.Client({ connectionString: databaseUrl });
      await db.connect();
      const first = await startCoordinatorProcess({ DATABASE_URL: databaseUrl, SWITCHYARD_COORDINATOR_ID: 'coord-a', ...LEASE });
      const runIds = await createRuns(first, 12, 4000);
      await eventually(async () => ((await journals(db, runIds)).size === runIds.length ? true : null));
      first.child.kill('SIGKILL');
      await first.exited;
      const second = await startCoordinatorProcess({ DATABASE_URL: databaseUrl, SWITCHYARD_COORDINATOR_ID: 'coord-b', ...LEASE });
      await eventually(() => allFinal(db, runIds), 20_000, 'every run to be final after the takeover');
      assertJournalsExact(await journals(db, runIds), runIds);
      const owners = await db.query<{ coordinator_id: string }>('select distinct coordinator_id from run_owner where run_id = any($1)', [runIds]);
      assert.deepEqual(owners.rows.map((r) => r.coordinator_id), ['coord-b']);
      await stopProcess(second);
      await db.end();
    });

    it('a frozen owner keeps its runs until its lease ends; one killed -9 is adopted at once, its lease notwithstanding', async () => {
      const databaseUrl = await sharedDatabaseUrl(kind);
      const db = new pg.Client({ connectionString: databaseUrl });
      await db.connect();
      const owner = await startCoordinatorProcess({ DATABASE_URL: databaseUrl, SWITCHYARD_COORDINATOR_ID: 'coord-k', ...LONG_LEASE });
      const peer = await startCoordinatorProcess({ DATABASE_URL: databaseUrl, SWITCHYARD_COORDINATOR_ID: 'coord-p', ...LONG_LEASE });
      const runIds = await createRuns(owner, 3, 600_000);
      const ownersOf = async () => (await db.query<{ coordinator_id: string }>('select distinct coordinator_id from run_owner where run_id = any($1)', [runIds])).rows.map((r) => r.coordinator_id);
      owner.child.kill('SIGSTOP');
      // Ten renew intervals: its renewals are long overdue, but its process (and its lock's connection) lives.
      await new Promise((resolve) => setTimeout(resolve, 2_000));
      assert.deepEqual(await ownersOf(), ['coord-k'], 'a frozen owner is not taken for dead before its lease ends');
      owner.child.kill('SIGKILL');
      await owner.exited;
      await eventually(async () => ((await ownersOf()).join() === 'coord-p' ? true : null), 30_000, 'the peer to adopt the runs of the killed owner');
      const { rows } = await db.query<{ lease_until: string }>("select lease_until from coordinators where id = 'coord-k'");
      assert.ok(Number(rows[0]?.lease_until) < Date.now(), 'its lease was ended by the adoption');
      // The peer's log reaches this process through a pipe, possibly after the database shows the adoption.
      await eventually(
        () => /process gone \(its liveness lock is free\): adopting its runs/.test(peer.output()),
        5_000,
        'the peer to log that it adopted the runs because their owner’s process was gone, not because its 120 s lease ran out',
      );
      const metrics = await (await peer.api('/metrics')).text();
      assert.match(metrics, /^switchyard_lease_takeovers_total\{why="process"\} 1$/m);
      await eventually(async () => {
        const views = await Promise.all(runIds.map(async (runId) => (await peer.api(`/api/v1/runs/${runId}`)).status));
        return views.every((status) => status === 200) ? true : null;
      }, 20_000, 'the adopted runs to be served by the peer');
      await stopProcess(peer);
      await db.end();
    });

    it('a SIGSTOPped owner whose lease was taken writes nothing after SIGCONT and exits', async () => {
      const databaseUrl = await sharedDatabaseUrl(kind);
      const db = new pg.Client({ connectionString: databaseUrl });
      await db.connect();
      const zombie = await startCoordinatorProcess({ DATABASE_URL: databaseUrl, SWITCHYARD_COORDINATOR_ID: 'coord-z', ...LEASE });
      const runIds = await createRuns(zombie, 5, 2500);
      await eventually(async () => ((await journals(db, runIds)).size === runIds.length ? true : null));
      zombie.child.kill('SIGSTOP');
      const owner = await startCoordinatorProcess({ DATABASE_URL: databaseUrl, SWITCHYARD_COORDINATOR_ID: 'coord-o', ...LEASE });
      await eventually(() => allFinal(db, runIds), 20_000, 'the new owner to finish every run');
      const before = await journals(db, runIds);
      zombie.child.kill('SIGCONT');
      const code = await Promise.race([zombie.exited, new Promise((resolve) => setTimeout(() => resolve('still running'), 10_000))]);
      assert.equal(code, 3, `the zombie exits once it finds itself fenced:\n${zombie.output().slice(-2000)}`);
      assert.match(zombie.output(), /lost its lease|fenced/);
      const afterwards = await journals(db, runIds);
      for (const runId of runIds) assert.equal(afterwards.get(runId)?.length, before.get(runId)?.length, `run ${runId}: nothing written by the zombie`);
      assertJournalsExact(afterwards, runIds);
      await stopProcess(owner);
      await db.end();
    });
  });
}
