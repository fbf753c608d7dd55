import type { Kysely } from 'kysely';
import { runIdFor } from '../../src/pipeline/run-id.ts';
import type { Schema } from '../../src/db/schema.ts';
import { loadRecordedRun, replayRecordedRun } from '../../src/replay/index.ts';
import type { AttemptLedger } from './ledger.ts';
import type { DeliveryRecord } from './load.ts';

export interface InvariantResult {
  name: string;
  ok: boolean;
  /** What was checked, e.g. "412 deliveries". */
  checked: string;
  /** Up to a few examples of what broke it. */
  violations: string[];
}

const FINAL_RUN = new Set(['success', 'failed', 'cancelled']);
const FINAL_JOB = new Set(['success', 'failed', 'cancelled', 'skipped', 'timed_out_stale', 'drift_dropped']);

function result(name: string, checked: string, violations: string[]): InvariantResult {
  return { name, ok: violations.length === 0, checked, violations: violations.slice(0, 5).concat(violations.length > 5 ? [`… and ${violations.length - 5} more`] : []) };
}

/** Every accepted delivery is recorded, processed, and made exactly one run; no run came from elsewhere. */
export async function deliveriesProcessedOnce(db: Kysely<Schema>, accepted: readonly DeliveryRecord[], workflow: string): Promise<InvariantResult> {
  const rows = await db.selectFrom('deliveries').select(['delivery_id', 'status', 'last_error']).where('source', '=', 'github').execute();
  const byId = new Map(rows.map((r) => [r.delivery_id, r]));
  const runIds = new Set((await db.selectFrom('runs').select('run_id').execute()).map((r) => r.run_id));
  const violations: string[] = [];
  const expected = new Set<string>();
  for (const delivery of accepted) {
    const row = byId.get(delivery.deliveryId);
    const runId = runIdFor('github', delivery.deliveryId, workflow);
    expected.add(runId);
    if (!row) violations.push(`${delivery.deliveryId}: accepted by ${delivery.acceptedBy} but not recorded (lost)`);
    else if (row.status !== 'processed') violations.push(`${delivery.deliveryId}: ${row.status} (${row.last_error ?? ''})`);
    if (!runIds.has(runId)) violations.push(`${delivery.deliveryId}: no run`);
  }
  for (const runId of runIds) if (!expected.has(runId)) violations.push(`run ${runId} belongs to no accepted delivery`);
  for (const row of rows) if (!accepted.some((d) => d.deliveryId === row.delivery_id)) violations.push(`${row.delivery_id}: recorded but never acknowledged to the sender`);
  return result('every accepted delivery processed exactly once', `${accepted.length} deliveries, ${runIds.size} runs`, violations);
}

export async function everyRunFinal(db: Kysely<Schema>): Promise<InvariantResult> {
  const runs = await db.selectFrom('runs').select(['run_id', 'status']).execute();
  const jobs = await db.selectFrom('jobs').select(['run_id', 'job_key', 'status']).execute();
  const timers = await db.selectFrom('timers').select(['run_id', 'kind']).execute();
  const violations = [
    ...runs.filter((r) => !FINAL_RUN.has(r.status)).map((r) => `run ${r.run_id}: ${r.status}`),
    ...jobs.filter((j) => !FINAL_JOB.has(j.status)).map((j) => `job ${j.run_id}/${j.job_key}: ${j.status}`),
    ...timers.map((t) => `run ${t.run_id}: a ${t.kind} deadline is still armed`),
  ];
  return result('every run final (and its jobs, with no deadline left armed)', `${runs.length} runs, ${jobs.length} jobs`, violations);
}

export function noDoubleDispatch(ledger: AttemptLedger): InvariantResult {
  const violations = ledger.overlaps().map(
    (o) => `${o.runId}/${o.jobName}: ${o.first.agentId} (${o.first.dispatchId}, until ${o.first.how ?? 'still held'}) and ${o.second.agentId} (${o.second.dispatchId})`,
  );
  for (const open of ledger.open()) violations.push(`${open.agentId} still holds ${open.runId}/${open.jobName} after every run ended`);
  return result('no job dispatched to two agents at once', `${ledger.size} attempts seen by agents`, violations);
}

/**
 * Along each run's journal the writers (coordinator, epoch) form contiguous blocks: once another
 * owner wrote, an earlier one never writes again. Interleaving would be two owners at once.
 */
export async function noRunWithTwoOwners(db: Kysely<Schema>): Promise<InvariantResult> {
  const rows = await db.selectFrom('run_events').select(['run_id', 'seq', 'written_by', 'writer_epoch']).orderBy('run_id').orderBy('seq').execute();
  const violations: string[] = [];
  const handovers = { runs: new Set<string>(), count: 0 };
  let run = '';
  let seen = new Set<string>();
  let current = '';
  for (const row of rows) {
    const writer = `${row.written_by ?? '?'}#${row.writer_epoch ?? '?'}`;
    if (row.run_id !== run) [run, seen, current] = [row.run_id, new Set([writer]), writer];
    else if (writer !== current) {
      if (seen.has(writer)) violations.push(`run ${run}: ${writer} wrote seq ${row.seq} after ${current} had taken over`);
      seen.add(writer);
      current = writer;
      handovers.count++;
      handovers.runs.add(run);
    }
  }
  return result('no run with two owners', `${rows.length} journal rows; ${handovers.count} ownership handovers in ${handovers.runs.size} runs`, violations);
}

/** Every run's journal replayed through the machine reproduces every journaled state and the stored snapshot. */
export async function journalsReplayExactly(db: Kysely<Schema>): Promise<InvariantResult> {
  const runs = await db.selectFrom('runs').select('run_id').execute();
  const violations: string[] = [];
  let events = 0;
  for (const { run_id: runId } of runs) {
    const report = await replayRecordedRun(await loadRecordedRun(db, runId));
    events += report.steps.length;
    if (report.exact && report.snapshotCheck.compared) continue;
    const why = report.failure?.message
      ?? (report.divergence && `diverges at seq ${report.divergence.seq} (${report.divergence.eventType})`)
      ?? (report.snapshotCheck.compared ? 'end state differs from the stored snapshot' : report.snapshotCheck.reason);
    violations.push(`run ${runId}: ${why}`);
  }
  return result('journal replay of every run matches its snapshots', `${runs.length} runs, ${events} events replayed`, violations);
}
