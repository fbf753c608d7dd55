import type { Kysely } from 'kysely';
import { findDeliveries, listDeliveries, requeueDelivery } from '../db/deliveries.ts';
import type { DeliveryKey } from '../db/deliveries.ts';
import type { Schema } from '../db/schema.ts';
import { pageOf, readPage } from './pagination.ts';
import { HttpError, sendJson } from './respond.ts';
import type { Router } from './router.ts';

export interface DeliveryApiDeps {
  db: Kysely<Schema>;
  now: () => number;
  onRequeued: (key: DeliveryKey) => void;
}

type DeliveryRow = Awaited<ReturnType<typeof findDeliveries>>[number];

/** One delivery as `GET /api/v1/deliveries/:id` shows it: its status, attempts, last error and the runs it created. */
function deliveryView(row: DeliveryRow) {
  const outcome = row.outcome as { runIds?: unknown } | null;
  const runIds = Array.isArray(outcome?.runIds) ? outcome.runIds.filter((id): id is string => typeof id === 'string') : [];
  return {
    ...{ source: row.source, deliveryId: row.delivery_id, eventName: row.event_name, status: row.status, attempts: row.attempts },
    ...{ error: row.last_error, receivedAt: row.received_at, processedAt: row.processed_at, outcome: row.outcome, runIds },
  };
}

/** The delivery an id names: the one of `source` when given, else the only one with that id (409 when sources share it). */
async function oneDelivery(db: Kysely<Schema>, deliveryId: string, source?: string): Promise<DeliveryRow> {
  const rows = await findDeliveries(db, deliveryId, source);
  const [row] = rows;
  if (!row) throw new HttpError(404, 'not found', source === undefined ? `no delivery ${deliveryId}` : `no delivery ${deliveryId} of source ${source}`);
  if (rows.length > 1) {
    const sources = rows.map((r) => r.source).join(', ');
    throw new HttpError(409, 'ambiguous delivery id', `deliveries of several sources have id ${deliveryId} (${sources}); ask for /api/v1/deliveries/<source>/${deliveryId}`);
  }
  return row;
}

/** The intake log (docs/http-api.md#routes): list, one delivery, and a retry of a finished one. */
export function registerDeliveryRoutes(router: Router, deps: DeliveryApiDeps): void {
  const { db } = deps;
  const retry = async (res: Parameters<Parameters<Router['on']>[2]>[0]['res'], key: DeliveryKey) => {
    if (!(await requeueDelivery(db, { ...key, now: deps.now() }))) throw new HttpError(404, 'not found', 'no finished delivery with that id');
    deps.onRequeued(key);
    sendJson(res, 202, { ...key, requeued: true });
  };
  router
    .on('GET', '/api/v1/deliveries', async ({ res, url }) => {
      const status = url.searchParams.get('status') ?? undefined;
      const page = readPage<[number, string, string]>(url, ['number', 'string', 'string'], 200);
      const rows = await listDeliveries(db, { status, limit: page.limit + 1, after: page.after });
      const { items, nextCursor } = pageOf(rows, page.limit, (row) => [Number(row.received_at), row.source, row.delivery_id]);
      sendJson(res, 200, { deliveries: items, nextCursor });
    })
    .on('GET', '/api/v1/deliveries/:id', async ({ res, params }) => {
      sendJson(res, 200, deliveryView(await oneDelivery(db, params['id'] ?? '')));
    })
    .on('GET', '/api/v1/deliveries/:source/:id', async ({ res, params }) => {
      sendJson(res, 200, deliveryView(await oneDelivery(db, params['id'] ?? '', params['source'] ?? '')));
    })
    .on('POST', '/api/v1/deliveries/:id/retry', async ({ res, params }) => {
      const row = await oneDelivery(db, params['id'] ?? '');
      await retry(res, { source: row.source, deliveryId: row.delivery_id });
    })
    .on('POST', '/api/v1/deliveries/:source/:id/retry', async ({ res, params }) => {
      await retry(res, { source: params['source'] ?? '', deliveryId: params['id'] ?? '' });
    });
}
