import { sql, type Kysely } from 'kysely';
import type { Schema } from '../../src/db/schema.ts';

export interface EndedRunsShape {
  /** Journal events per run (each about 250 bytes). */
  events: number;
  /** Log chunks per run (each about 520 bytes). */
  chunks: number;
  /** When they ended (ms). */
  endedAt: number;
  /** Run ids start with this. */
  prefix: string;
}

/** `n` ended runs (success, no longer live), each with a journal, a snapshot and log chunks, written with a few statements. */
export async function seedEndedRuns(db: Kysely<Schema>, n: number, shape: EndedRunsShape): Promise<string[]> {
  const ids = Array.from({ length: n }, (_, i) => `${shape.prefix}${String(i).padStart(6, '0')}`);
  const { endedAt, events, chunks } = shape;
  await sql`
    INSERT INTO runs (run_id, workflow_name, repository, status, created_at, updated_at, finished_at)
    SELECT id, 'ci', 'acme/app', 'success', ${endedAt - 100}, ${endedAt}, ${endedAt} FROM unnest(${ids}::text[]) AS id`.execute(db);
  await sql`INSERT INTO run_owner (run_id, coordinator_id, epoch, live) SELECT id, 'c', 1, false FROM unnest(${ids}::text[]) AS id`.execute(db);
  await sql`
    INSERT INTO run_events (run_id, seq, event, received_at, state_after, written_by, writer_epoch)
    SELECT id, s, json_build_object('type', 'e' || s, 'pad', repeat('x', 200)), ${endedAt}::int8 + s, '{"run":"success"}', 'c', 1
      FROM unnest(${ids}::text[]) AS id, generate_series(0, ${events - 1}) AS s`.execute(db);
  await sql`
    INSERT INTO run_snapshots (run_id, seq, machine_id, machine_version, snapshot, status, updated_at)
    SELECT id, ${events - 1}, 'run', 4004, '{"status":"done"}', 'done', ${endedAt} FROM unnest(${ids}::text[]) AS id`.execute(db);
  await sql`
    INSERT INTO job_logs (run_id, job_key, dispatch_id, step_index, lines, bytes, created_at)
    SELECT id, 'build', 'd-' || id, 0, json_build_array('line ' || c, repeat('y', 500)), 510, ${endedAt}::int8 + c
      FROM unnest(${ids}::text[]) AS id, generate_series(1, ${chunks}) AS c`.execute(db);
  return ids;
}
