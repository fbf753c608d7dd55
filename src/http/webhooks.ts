import { createHmac, randomUUID, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import type { ClaimedDelivery, DeliveryKey, IntakeClaim } from '../db/deliveries.ts';
import { parseDeliveryBody, type NewDelivery } from '../db/deliveries.ts';
import type { Schema } from '../db/schema.ts';
import { StageTrace } from '../../lib/stage-trace.ts';
import { HttpError, readBody, sendJson } from './respond.ts';
import type { RouteContext, Router } from './router.ts';

export const MAX_WEBHOOK_BYTES = 25 * 1024 * 1024;
const KEPT_HEADERS = ['x-github-event', 'x-github-delivery', 'x-github-hook-installation-target-id', 'content-type', 'user-agent'];

export interface WebhookDeps {
  db: Kysely<Schema>;
  /** Records a delivery durably (`deliveryRecorder`); false: a duplicate. */
  record: (d: NewDelivery) => Promise<boolean>;
  githubSecrets: readonly string[];
  now: () => number;
  log: Logger;
  /** Wakes the intake queue once the delivery is durable. */
  onAccepted: (key: DeliveryKey) => void;
  /** A claim to record the delivery with, so this coordinator processes it at once (docs/architecture.md#one-delivery-from-webhook-to-finished-run). */
  claimAtIntake?: (bytes: number) => IntakeClaim | null;
  processClaimed?: (delivery: ClaimedDelivery) => void;
  observe: (source: string, outcome: 'accepted' | 'duplicate' | 'rejected', seconds: number) => void;
}

/**
 * `X-Hub-Signature-256` over the exact body bytes, compared in constant time against every
 * configured secret (INT-1). Hand-rolled over the raw Buffer: a string API would re-encode bytes
 * that are not valid UTF-8 and verify something other than what GitHub signed.
 */
export function verifySignature(body: Buffer, header: string | undefined, secrets: readonly string[]): boolean {
  if (!header?.startsWith('sha256=')) return false;
  const given = Buffer.from(header.slice('sha256='.length), 'hex');
  if (given.length !== 32) return false;
  return secrets.some((secret) => timingSafeEqual(createHmac('sha256', secret).update(body).digest(), given));
}

function header(req: IncomingMessage, name: string): string | undefined {
  const value = req.headers[name];
  return Array.isArray(value) ? value[0] : value;
}

function keptHeaders(req: IncomingMessage, extra: readonly string[] = []): Record<string, string> {
  const kept: Record<string, string> = {};
  for (const name of [...KEPT_HEADERS, ...extra]) {
    const value = header(req, name.toLowerCase());
    if (value !== undefined) kept[name.toLowerCase()] = value;
  }
  return kept;
}

export function parseJsonBody(body: Buffer): unknown {
  try {
    return parseDeliveryBody(body);
  } catch (thrown) {
    throw new HttpError(400, 'malformed body', thrown instanceof Error ? thrown.message : 'not JSON');
  }
}

/**
 * Records the delivery durably, then answers: 202 first time, 200 duplicate:true after (INT-3, INT-4).
 * With a claim, processing starts while the row is written (docs/architecture.md#one-delivery-from-webhook-to-finished-run):
 * it creates no run and writes no outcome until the row is stored, and stops if it is not.
 */
export async function acceptDelivery(
  deps: WebhookDeps,
  res: RouteContext['res'],
  received: { source: string; deliveryId: string; eventName: string; headers: Record<string, string>; body: Buffer; parsedBody: unknown },
  trace: StageTrace,
): Promise<void> {
  const { parsedBody, ...d } = received;
  const claim = deps.claimAtIntake?.(d.body.length) ?? null;
  const now = deps.now();
  const recording = deps.record({ ...d, now, claim });
  trace.mark('intake.sent');
  if (claim) {
    const delivery = { ...d, parsedBody, trace, receivedAt: now, status: 'processing' as const, attempts: 0, recording: recording.catch(() => false) };
    // On the next turn, once the INSERT has been handed to a connection: the pipeline's work overlaps its round trip.
    setImmediate(() => deps.processClaimed?.(delivery));
  }
  const fresh = await recording;
  const seconds = (performance.now() - trace.startedAt) / 1000;
  deps.observe(d.source, fresh ? 'accepted' : 'duplicate', seconds);
  if (!fresh) {
    sendJson(res, 200, { accepted: true, duplicate: true, deliveryId: d.deliveryId });
    return;
  }
  // Recorded is recorded: processed whether or not the client is still there to read the answer.
  if (!claim) deps.onAccepted({ source: d.source, deliveryId: d.deliveryId });
  sendJson(res, 202, { accepted: true, deliveryId: d.deliveryId });
}

async function githubRoute(deps: WebhookDeps, { req, res }: RouteContext): Promise<void> {
  const trace = new StageTrace();
  const body = await readBody(req, MAX_WEBHOOK_BYTES);
  trace.mark('request.read');
  if (!verifySignature(body, header(req, 'x-hub-signature-256'), deps.githubSecrets)) {
    deps.observe('github', 'rejected', 0);
    const reason = deps.githubSecrets.length === 0 ? 'no GitHub webhook secret is configured' : 'signature does not match';
    throw new HttpError(401, 'invalid signature', reason);
  }
  const eventName = header(req, 'x-github-event');
  const deliveryId = header(req, 'x-github-delivery');
  if (!eventName) throw new HttpError(400, 'missing header', 'X-GitHub-Event is required');
  if (!deliveryId) throw new HttpError(400, 'missing header', 'X-GitHub-Delivery is required');
  const parsedBody = parseJsonBody(body);
  trace.mark('request.verified');
  await acceptDelivery(deps, res, { source: 'github', deliveryId, eventName, headers: keptHeaders(req), body, parsedBody }, trace);
}

export function registerGithubWebhook(router: Router, deps: WebhookDeps): void {
  router.on('POST', '/webhooks/github', (ctx) => githubRoute(deps, ctx));
}

export { header as requestHeader, keptHeaders, randomUUID as newDeliveryId };
