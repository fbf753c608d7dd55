import { createHmac, timingSafeEqual } from 'node:crypto';
import { findGenericSource } from '../db/generic-sources.ts';
import { StageTrace } from '../../lib/stage-trace.ts';
import { HttpError, readBody } from './respond.ts';
import type { RouteContext, Router } from './router.ts';
import { MAX_WEBHOOK_BYTES, acceptDelivery, keptHeaders, newDeliveryId, parseJsonBody, requestHeader } from './webhooks.ts';
import type { WebhookDeps } from './webhooks.ts';

type SourceRow = Awaited<ReturnType<typeof findGenericSource>>;

function equalSecret(given: string, expected: string): boolean {
  const a = Buffer.from(given);
  const b = Buffer.from(expected);
  return a.length === b.length && timingSafeEqual(a, b);
}

/** INT-9: per source `hmac-sha256` (hex, optional `sha256=`), `api-key`, or `none`. */
function verified(source: NonNullable<SourceRow>, body: Buffer, value: string | undefined): boolean {
  if (source.verification === 'none') return true;
  if (!value || !source.secret) return false;
  if (source.verification === 'api-key') return equalSecret(value, source.secret);
  const expected = createHmac('sha256', source.secret).update(body).digest('hex');
  return equalSecret(value.replace(/^sha256=/, ''), expected);
}

async function genericRoute(deps: WebhookDeps, { req, res, params }: RouteContext): Promise<void> {
  const trace = new StageTrace();
  const name = params['source'] ?? '';
  const source = await findGenericSource(deps.db, name);
  if (!source) throw new HttpError(404, 'unknown source', `no generic webhook source named ${name}`);
  trace.mark('source.read');
  const body = await readBody(req, MAX_WEBHOOK_BYTES);
  trace.mark('request.read');
  const headerName = (source.header ?? (source.verification === 'api-key' ? 'x-api-key' : 'x-signature-256')).toLowerCase();
  if (!verified(source, body, requestHeader(req, headerName))) throw new HttpError(401, 'invalid signature', `${headerName} does not verify`);
  const parsedBody = parseJsonBody(body);
  trace.mark('request.verified');
  const eventType = (source.event_type_header && requestHeader(req, source.event_type_header.toLowerCase())) || 'default';
  const idempotency = source.idempotency_header ? requestHeader(req, source.idempotency_header.toLowerCase()) : undefined;
  const extra = [source.event_type_header, source.idempotency_header].filter((h): h is string => Boolean(h));
  await acceptDelivery(
    deps,
    res,
    { source: `generic:${name}`, deliveryId: idempotency ?? newDeliveryId(), eventName: eventType, headers: keptHeaders(req, extra), body, parsedBody },
    trace,
  );
}

export function registerGenericWebhook(router: Router, deps: WebhookDeps): void {
  router.on('POST', '/webhooks/generic/:source', (ctx) => genericRoute(deps, ctx));
}
