import { sql } from 'kysely';
import type { Kysely } from 'kysely';
import { Batcher } from '../../lib/batcher.ts';
import { coerceError } from '../../lib/errors.ts';
import { executePrepared } from './database.ts';
import { retryingTransient } from './errors.ts';
import { toJson } from './json.ts';
import { recordset } from './recordset.ts';
import type { Schema } from './schema.ts';
import type { StageTrace } from '../../lib/stage-trace.ts';

export type DeliveryStatus =
  | 'received'
  | 'processing'
  | 'processed'
  | 'ignored'
  | 'lockfile_missing'
  | 'lockfile_corrupt'
  | 'retrying'
  | 'dead';

export interface Delivery {
  source: string;
  deliveryId: string;
  eventName: string;
  headers: Record<string, string>;
  body: Buffer;
  receivedAt: number;
  status: DeliveryStatus;
  attempts: number;
  /**
   * Handed to processing by this process while its row is being recorded: resolves true once the row
   * is stored, false when it was not (a duplicate, or the INSERT failed). Nothing is written for the
   * delivery (a run, an outcome) before it resolves true (`isRecorded`); and no earlier attempt can
   * have started its runs, so they are not looked up before they are created.
   */
  recording?: Promise<boolean>;
  /** The body as the route parsed it, for a delivery handed over as it was received: not parsed again. */
  parsedBody?: unknown;
  /** Where its time goes on the way to its first dispatch (lib/stage-trace.ts), for a delivery handed over as it was received. */
  trace?: StageTrace;
}

/** A delivery handed to processing by the worker that claimed it as it was being recorded. */
export type ClaimedDelivery = Delivery & { recording: Promise<boolean> };

export interface DeliveryKey {
  source: string;
  deliveryId: string;
}

/** A delivery to record, claimed by the worker that will process it at once, or left to a sweep. */
export interface NewDelivery {
  source: string;
  deliveryId: string;
  eventName: string;
  headers: Record<string, string>;
  body: Buffer;
  now: number;
  claim?: IntakeClaim | null;
}

/** INT-3/INT-4: one atomic claim of the (source, delivery id) key; false means a duplicate. */
export async function recordDelivery(db: Kysely<Schema>, d: NewDelivery): Promise<boolean> {
  const [fresh] = await recordDeliveries(db, [d]);
  return fresh === true;
}

/**
 * `recordDelivery` of many deliveries in one statement, all or none: for each, whether it is
 * recorded now (false: a duplicate, of a stored delivery or of one earlier in the list).
 */
export async function recordDeliveries(db: Kysely<Schema>, list: readonly NewDelivery[]): Promise<boolean[]> {
  const rows = list.map((d) => {
    // Claimed as it is written: the worker that accepted it processes it at once (its lease still
    // covers a crash, like any claim); unclaimed, it waits for a sweep.
    const claimed = d.claim ? { status: 'processing', claimed_by: d.claim.worker, claim_until: d.claim.claimUntil } : { status: 'received', claimed_by: null, claim_until: null };
    return { source: d.source, delivery_id: d.deliveryId, event_name: d.eventName, headers: toJson(d.headers), body: d.body, received_at: d.now, next_attempt_at: d.now, ...claimed };
  });
  const statement = db
    .insertInto('deliveries')
    .values(rows)
    .onConflict((oc) => oc.columns(['source', 'delivery_id']).doNothing())
    .returning(['source', 'delivery_id']);
  // Prepared once per connection and list length: this INSERT is on the way of every webhook's answer.
  const recorded = await executePrepared<{ source: string; delivery_id: string }>(db, statement.compile());
  // A key inserted now is fresh for the first delivery of the list that has it, not for a repeat.
  const inserted = new Set(recorded.map((row) => `${row.source}\u0000${row.delivery_id}`));
  return list.map((d) => inserted.delete(`${d.source}\u0000${d.deliveryId}`));
}

/** Deliveries recorded by one statement at most. */
const MAX_RECORD_BATCH = 64;
/**
 * The waits before a batch whose INSERT failed for a moment (a reset connection) is tried again. The
 * sender is waiting for its answer, and GitHub does not send again a delivery answered 5xx.
 */
const RECORD_RETRY_WAITS_MS = [50, 250];

/**
 * `recordDelivery` a batch at a time: the deliveries that arrive while one INSERT is in flight are
 * recorded together by the next. A transient database error is tried again twice. A batch the
 * database refuses is recorded again one delivery at a time, so one delivery's bad row fails that
 * delivery alone.
 */
export function deliveryRecorder(db: Kysely<Schema>): (d: NewDelivery) => Promise<boolean> {
  const writer = new Batcher<NewDelivery, boolean>(async (list) => {
    try {
      return await retryingTransient(() => recordDeliveries(db, list), RECORD_RETRY_WAITS_MS);
    } catch (thrown) {
      if (list.length === 1) throw thrown;
      return Promise.all(list.map((d) => recordDelivery(db, d).catch((error: unknown) => coerceError(error))));
    }
  }, MAX_RECORD_BATCH);
  return (d) => writer.add(d);
}

/** A delivery claimed by the worker that records it (the embedded queue with room to spare). */
export interface IntakeClaim {
  worker: string;
  claimUntil: number;
}

/** Claims deliveries that are due (new, retrying, or whose worker's lease ran out) (INT-5). */
export async function claimDueDeliveries(
  db: Kysely<Schema>,
  { worker, now, leaseMs, limit }: { worker: string; now: number; leaseMs: number; limit: number },
): Promise<DeliveryKey[]> {
  const { rows } = await sql<{ source: string; delivery_id: string }>`
    UPDATE deliveries SET status = 'processing', claimed_by = ${worker}, claim_until = ${now + leaseMs}
     WHERE (source, delivery_id) IN (
       SELECT source, delivery_id FROM deliveries
        WHERE (status IN ('received', 'retrying') AND next_attempt_at <= ${now})
           OR (status = 'processing' AND claim_until < ${now})
        ORDER BY received_at LIMIT ${limit} FOR UPDATE SKIP LOCKED)
    RETURNING source, delivery_id`.execute(db);
  return rows.map((row) => ({ source: row.source, deliveryId: row.delivery_id }));
}

/** Claims one named delivery (the BullMQ worker's way in); false when another worker holds it or it is done. */
export async function claimDelivery(db: Kysely<Schema>, key: DeliveryKey & { worker: string; now: number; leaseMs: number }): Promise<boolean> {
  const result = await db
    .updateTable('deliveries')
    .set({ status: 'processing', claimed_by: key.worker, claim_until: key.now + key.leaseMs })
    .where('source', '=', key.source)
    .where('delivery_id', '=', key.deliveryId)
    .where((eb) => eb.or([eb('status', 'in', ['received', 'retrying']), eb.and([eb('status', '=', 'processing'), eb('claim_until', '<', key.now)])]))
    .executeTakeFirst();
  return result.numUpdatedRows > 0n;
}

export async function loadDelivery(db: Kysely<Schema>, key: DeliveryKey): Promise<Delivery | null> {
  const row = await db.selectFrom('deliveries').selectAll().where('source', '=', key.source).where('delivery_id', '=', key.deliveryId).executeTakeFirst();
  if (!row) return null;
  return {
    source: row.source,
    deliveryId: row.delivery_id,
    eventName: row.event_name,
    headers: row.headers as Record<string, string>,
    body: row.body,
    receivedAt: Number(row.received_at),
    status: row.status as DeliveryStatus,
    attempts: row.attempts,
  };
}

export type DeliveryOutcome = DeliveryKey & { worker: string; status: DeliveryStatus; outcome: unknown; now: number };

/** Records the final outcome of processing, of many deliveries in one statement (only the claiming worker may). */
export async function finishDeliveries(db: Kysely<Schema>, outcomes: readonly DeliveryOutcome[]): Promise<void> {
  const rows = outcomes.map((o) => toJson({ source: o.source, delivery_id: o.deliveryId, worker: o.worker, status: o.status, outcome: o.outcome, processed_at: o.now }));
  // Prepared once per connection: every delivery ends here.
  await executePrepared(
    db,
    sql`
    UPDATE deliveries AS d SET status = f.status, outcome = f.outcome, processed_at = f.processed_at,
           claimed_by = NULL, claim_until = NULL, last_error = NULL
      FROM ${recordset(rows, 'f', 'source text, delivery_id text, worker text, status text, outcome json, processed_at int8')} AS f
     WHERE d.source = f.source AND d.delivery_id = f.delivery_id AND d.claimed_by = f.worker`.compile(db),
  );
}

/** A transient failure: try again at `nextAttemptAt`, or give up (`dead`) after the last attempt (INT-6). */
export async function retryDelivery(
  db: Kysely<Schema>,
  key: DeliveryKey & { worker: string; error: string; nextAttemptAt: number | null },
): Promise<void> {
  await db
    .updateTable('deliveries')
    .set((eb) => ({
      status: key.nextAttemptAt === null ? 'dead' : 'retrying',
      attempts: eb('attempts', '+', 1),
      next_attempt_at: key.nextAttemptAt ?? 0,
      last_error: key.error.slice(0, 2000),
      claimed_by: null,
      claim_until: null,
    }))
    .where('source', '=', key.source)
    .where('delivery_id', '=', key.deliveryId)
    .where('claimed_by', '=', key.worker)
    .execute();
}

/** `POST /api/v1/deliveries/:id/retry`: a dead (or any finished) delivery goes back to the queue. */
export async function requeueDelivery(db: Kysely<Schema>, key: DeliveryKey & { now: number }): Promise<boolean> {
  const result = await db
    .updateTable('deliveries')
    .set({ status: 'received', attempts: 0, next_attempt_at: key.now, last_error: null })
    .where('source', '=', key.source)
    .where('delivery_id', '=', key.deliveryId)
    .where('status', 'in', ['dead', 'lockfile_missing', 'lockfile_corrupt', 'ignored', 'processed'])
    .executeTakeFirst();
  return result.numUpdatedRows > 0n;
}

const LISTED_COLUMNS = ['source', 'delivery_id', 'event_name', 'received_at', 'status', 'attempts', 'last_error', 'outcome', 'processed_at'] as const;

/** Newest first; continues after the sort key `[received_at, source, delivery_id]` (docs/http-api.md#pagination). */
export async function listDeliveries(db: Kysely<Schema>, filter: { status?: string; limit: number; after?: [number, string, string] | null }) {
  let query = db
    .selectFrom('deliveries')
    .select(LISTED_COLUMNS)
    .orderBy('received_at', 'desc')
    .orderBy('source', 'desc')
    .orderBy('delivery_id', 'desc')
    .limit(filter.limit);
  const after = filter.after;
  if (after) query = query.where((eb) => eb(eb.refTuple('received_at', 'source', 'delivery_id'), '<', eb.tuple(after[0], after[1], after[2])));
  if (filter.status) query = query.where('status', '=', filter.status);
  return query.execute();
}

/** Deliveries with this id, from any source (a generic source's ids may repeat a GitHub one). */
export async function findDeliveries(db: Kysely<Schema>, deliveryId: string, source?: string) {
  let query = db.selectFrom('deliveries').select(LISTED_COLUMNS).where('delivery_id', '=', deliveryId).orderBy('source');
  if (source !== undefined) query = query.where('source', '=', source);
  return query.execute();
}

/** Deliveries waiting to be processed now (not those retrying later). */
export async function countDueDeliveries(db: Kysely<Schema>, now: number): Promise<number> {
  const { rows } = await sql<{ n: number }>`
    SELECT count(*)::int AS n FROM deliveries
     WHERE (status IN ('received', 'retrying') AND next_attempt_at <= ${now}) OR status = 'processing'`.execute(db);
  return rows[0]?.n ?? 0;
}

/** Due deliveries without claiming them (the BullMQ sweep enqueues them; the worker claims). */
export async function listDueDeliveries(db: Kysely<Schema>, { now, limit }: { now: number; limit: number }) {
  const { rows } = await sql<{ source: string; delivery_id: string; attempts: number }>`
    SELECT source, delivery_id, attempts FROM deliveries
     WHERE (status IN ('received', 'retrying') AND next_attempt_at <= ${now})
        OR (status = 'processing' AND claim_until < ${now})
     ORDER BY received_at LIMIT ${limit}`.execute(db);
  return rows.map((row) => ({ source: row.source, deliveryId: row.delivery_id, attempts: row.attempts }));
}

/**
 * A delivery body as JSON: strict UTF-8 (a leading BOM dropped), then JSON.parse. The webhook
 * routes check a body with it before accepting it and the pipeline reads it with it, so an
 * accepted body always parses again.
 */
export function parseDeliveryBody(body: Buffer): unknown {
  return JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(body)) as unknown;
}

/** Deliveries given up on (`dead`): they wait for a retry by hand (`switchyard_deliveries_dead`). */
export async function countDeadDeliveries(db: Kysely<Schema>): Promise<number> {
  const row = await db.selectFrom('deliveries').select((eb) => eb.fn.countAll<string>().as('n')).where('status', '=', 'dead').executeTakeFirst();
  return Number(row?.n ?? 0);
}
