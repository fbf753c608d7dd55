import { sql, type Kysely } from 'kysely';
import type { StoredRun } from '../../actors/runs/ports.ts';
import { TERMINAL_RUN_STATUSES } from './run-status.ts';
import type { Schema } from './schema.ts';

/** A run as the supervisor restores it (the `StoredRun` of its port). */
export type RestorableRun = StoredRun;

/**
 * Snapshot, journal tail (the events after the snapshot's seq), armed deadlines and not-yet-done
 * outbox effects of each run, in four queries whatever the number of runs. Runs without a snapshot
 * are left out. Tails and effects come in order.
 */
export async function loadRunsForRestore(db: Kysely<Schema>, runIds: readonly string[]): Promise<RestorableRun[]> {
  if (runIds.length === 0) return [];
  const ids = [...new Set(runIds)];
  const [snapshots, tails, timers, effects] = await Promise.all([
    db
      .selectFrom('run_snapshots')
      .select(['run_id', 'seq', 'machine_id', 'machine_version', 'snapshot', 'status'])
      .where('run_id', '=', (eb) => eb.fn('any', [eb.val(ids)]))
      .orderBy('run_id')
      .execute(),
    db
      .selectFrom('run_snapshots as s')
      .innerJoin('run_events as e', (join) => join.onRef('e.run_id', '=', 's.run_id').onRef('e.seq', '>', 's.seq'))
      .select(['e.run_id', 'e.seq', 'e.event'])
      .where('s.run_id', '=', (eb) => eb.fn('any', [eb.val(ids)]))
      .orderBy('e.run_id')
      .orderBy('e.seq')
      .execute(),
    db
      .selectFrom('timers')
      .select(['run_id', 'deadline_id', 'kind', 'job_key', 'due_at'])
      .where('run_id', '=', (eb) => eb.fn('any', [eb.val(ids)]))
      .orderBy('due_at')
      .orderBy('deadline_id')
      .execute(),
    db
      .selectFrom('outbox')
      .select(['run_id', 'effect_id', 'kind', 'payload'])
      .where('run_id', '=', (eb) => eb.fn('any', [eb.val(ids)]))
      .where('done_at', 'is', null)
      .orderBy('created_at')
      .orderBy('effect_id')
      .execute(),
  ]);
  const runs = new Map<string, RestorableRun>();
  for (const s of snapshots) {
    runs.set(s.run_id, {
      runId: s.run_id,
      seq: s.seq,
      machineId: s.machine_id,
      machineVersion: s.machine_version,
      snapshot: s.snapshot,
      status: s.status,
      timers: [],
      pendingEffects: [],
      tail: [],
    });
  }
  for (const e of tails) runs.get(e.run_id)?.tail?.push({ seq: e.seq, event: e.event });
  for (const t of timers) {
    runs.get(t.run_id)?.timers.push({ deadlineId: t.deadline_id, kind: t.kind, jobKey: t.job_key, dueAt: t.due_at });
  }
  for (const e of effects) {
    runs.get(e.run_id)?.pendingEffects.push({ effectId: e.effect_id, kind: e.kind, payload: e.payload });
  }
  return [...runs.values()];
}

/** Runs this coordinator owns whose projection is not finished: the actors to bring back at start. */
export async function listOwnedActiveRuns(
  db: Kysely<Schema>,
  { coordinatorId }: { coordinatorId: string },
): Promise<string[]> {
  const rows = await db
    .selectFrom('run_owner as o')
    .innerJoin('runs as r', 'r.run_id', 'o.run_id')
    .select('o.run_id')
    .where('o.coordinator_id', '=', coordinatorId)
    // Written as the index predicate (not `= $1`), so the partial index run_owner_live_idx serves it.
    .where(sql<boolean>`o.live`)
    .where('r.status', 'not in', TERMINAL_RUN_STATUSES)
    .orderBy('o.run_id')
    .execute();
  return rows.map((row) => row.run_id);
}
