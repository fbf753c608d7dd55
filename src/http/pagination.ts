import { HttpError } from './respond.ts';

/**
 * Cursor pagination of the list routes (docs/http-api.md#pagination): `?limit=&cursor=`. A cursor is
 * opaque to clients: base64url of the JSON of the last item's sort key; `nextCursor` is null on the
 * last page. A cursor that does not decode to a key of the list's shape is 400.
 */
export interface Page<K> {
  limit: number;
  /** The sort key to continue after; null for the first page. */
  after: K | null;
}

export type KeyPart = string | number;

export const DEFAULT_LIMIT = 100;
export const MAX_LIMIT = 1000;

/**
 * Reads `limit` and `cursor`; `shape` lists the type of each part of the sort key, in order.
 * `defaultLimit` keeps a route's earlier page size.
 */
export function readPage<K extends KeyPart[]>(url: URL, shape: readonly ('string' | 'number')[], defaultLimit = DEFAULT_LIMIT): Page<K> {
  const rawLimit = url.searchParams.get('limit');
  let limit = defaultLimit;
  if (rawLimit !== null) {
    if (!/^\d+$/.test(rawLimit) || Number(rawLimit) < 1) throw new HttpError(400, 'invalid request', `limit: must be a whole number from 1 to ${MAX_LIMIT}`);
    limit = Math.min(Number(rawLimit), MAX_LIMIT);
  }
  const cursor = url.searchParams.get('cursor');
  return { limit, after: cursor === null || cursor === '' ? null : (decodeCursor(cursor, shape) as K) };
}

function decodeCursor(cursor: string, shape: readonly ('string' | 'number')[]): KeyPart[] {
  const bad = () => new HttpError(400, 'invalid cursor', 'cursor: not a cursor this list gave out; start again without one');
  if (!/^[A-Za-z0-9_-]+$/.test(cursor)) throw bad();
  let parts: unknown;
  try {
    parts = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) as unknown;
  } catch {
    throw bad();
  }
  if (!Array.isArray(parts) || parts.length !== shape.length) throw bad();
  const fits = parts.every((part, i) => (shape[i] === 'number' ? Number.isSafeInteger(part) : typeof part === 'string'));
  if (!fits) throw bad();
  return parts as KeyPart[];
}

export function encodeCursor(key: readonly KeyPart[]): string {
  return Buffer.from(JSON.stringify(key), 'utf8').toString('base64url');
}

/**
 * One page from `limit + 1` rows read in sort order: the first `limit`, and the cursor of the last
 * of them when more follow.
 */
export function pageOf<T>(rows: readonly T[], limit: number, keyOf: (row: T) => readonly KeyPart[]): { items: T[]; nextCursor: string | null } {
  const items = rows.slice(0, limit);
  const last = items.at(-1);
  return { items, nextCursor: rows.length > limit && last !== undefined ? encodeCursor(keyOf(last)) : null };
}
