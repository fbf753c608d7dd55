import type { IncomingMessage, ServerResponse } from 'node:http';
import type { z } from 'zod';

/** An error a handler throws to answer with a status and a reason (never a stack trace). */
export class HttpError extends Error {
  override readonly name = 'HttpError';
  constructor(
    readonly status: number,
    readonly error: string,
    readonly reason?: string,
  ) {
    super(reason ? `${error}: ${reason}` : error);
  }
}

/** A request body checked against `schema`; a mismatch is a 400 naming the first field that is wrong. */
export function parseBody<T>(schema: z.ZodType<T>, value: unknown): T {
  const result = schema.safeParse(value);
  if (result.success) return result.data;
  const issue = result.error.issues[0];
  throw new HttpError(400, 'invalid request', `${issue?.path.join('.') || 'body'}: ${issue?.message ?? 'invalid'}`);
}

export function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

/** A static file of the page assets (visualizer, runs page): never cached stale, never sniffed. */
export function sendAsset(res: ServerResponse, contentType: string, body: Buffer | string): void {
  res.writeHead(200, {
    'content-type': contentType,
    'content-length': Buffer.byteLength(body),
    'cache-control': 'no-cache',
    'x-content-type-options': 'nosniff',
  });
  res.end(body);
}

export function sendText(res: ServerResponse, status: number, contentType: string, body: string): void {
  res.writeHead(status, { 'content-type': contentType, 'content-length': Buffer.byteLength(body) });
  res.end(body);
}

/** Reads the whole body, refusing more than `limit` bytes with 413. */
export async function readBody(req: IncomingMessage, limit: number): Promise<Buffer> {
  const declared = Number(req.headers['content-length'] ?? 0);
  if (declared > limit) throw new HttpError(413, 'payload too large', `body over ${limit} bytes`);
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    const buffer = chunk as Buffer;
    size += buffer.length;
    if (size > limit) throw new HttpError(413, 'payload too large', `body over ${limit} bytes`);
    chunks.push(buffer);
  }
  return Buffer.concat(chunks);
}

export async function readJson(req: IncomingMessage, limit: number): Promise<unknown> {
  const body = await readBody(req, limit);
  if (body.length === 0) return {};
  try {
    return JSON.parse(body.toString('utf8')) as unknown;
  } catch (thrown) {
    throw new HttpError(400, 'malformed body', thrown instanceof Error ? thrown.message : 'not JSON');
  }
}
