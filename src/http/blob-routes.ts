import type { ServerResponse } from 'node:http';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { BlobTooLargeError } from '../blobs/blob-store.ts';
import type { UrlSigner } from '../blobs/signed-urls.ts';
import type { Uploads } from '../blobs/uploads.ts';
import { HttpError, sendJson } from './respond.ts';
import type { RouteContext, Router } from './router.ts';

export interface BlobRouteDeps {
  uploads: Uploads;
  signer: UrlSigner;
}

/**
 * The URLs agents get for blobs (docs/blobs.md): `PUT /blobs/uploads/:id` takes one upload body,
 * `GET /blobs/objects/:key` serves one object. No bearer token: the signature in the query is the
 * authority, and a tampered, expired or borrowed one gets 403 and no bytes.
 */
export function registerBlobRoutes(router: Router, deps: BlobRouteDeps): void {
  router
    .on('PUT', '/blobs/uploads/:id', (ctx) => uploadRoute(deps, ctx))
    .on('GET', '/blobs/objects/:key', (ctx) => downloadRoute(deps, ctx));
}

function checkSignature(deps: BlobRouteDeps, { req, url }: RouteContext): void {
  const verdict = deps.signer.verify(req.method ?? '', url.pathname, url.searchParams);
  if (!verdict.ok) throw new HttpError(403, 'forbidden', `${verdict.reason}: this URL does not open ${url.pathname}`);
}

async function uploadRoute(deps: BlobRouteDeps, ctx: RouteContext): Promise<void> {
  checkSignature(deps, ctx);
  const uploadId = ctx.params['id'] ?? '';
  let received;
  try {
    received = await deps.uploads.receive(uploadId, ctx.req);
  } catch (thrown) {
    if (thrown instanceof BlobTooLargeError) throw new HttpError(413, 'payload too large', thrown.message);
    throw thrown;
  }
  if (received === 'unknown') throw new HttpError(404, 'not found', `no upload ${uploadId}`);
  if (received === 'expired') throw new HttpError(403, 'forbidden', `upload ${uploadId} expired`);
  if (received === 'already uploaded') throw new HttpError(409, 'conflict', `upload ${uploadId} already has its body`);
  sendJson(ctx.res, 200, { uploadId, stored: true });
}

async function downloadRoute(deps: BlobRouteDeps, ctx: RouteContext): Promise<void> {
  checkSignature(deps, ctx);
  const key = ctx.params['key'] ?? '';
  const found = await deps.uploads.store.get(key).catch((thrown: unknown) => {
    if (thrown instanceof RangeError) throw new HttpError(400, 'bad request', thrown.message);
    throw thrown;
  });
  if (!found) throw new HttpError(404, 'not found', `no object ${key}`);
  await sendBlob(ctx.res, found, 'application/octet-stream');
}

/** Streams a stored object as the response body, chunk by chunk. */
export async function sendBlob(res: ServerResponse, found: { body: Readable; sizeBytes: number }, contentType: string): Promise<void> {
  res.writeHead(200, { 'content-type': contentType, 'content-length': found.sizeBytes });
  await pipeline(found.body, res);
}
