import { createHmac, hkdfSync, timingSafeEqual } from 'node:crypto';

/** Where an agent's upload goes (`PUT`), or where it reads an object (`GET`). */
export type SignedMethod = 'GET' | 'PUT';

export type UrlVerdict = { ok: true } | { ok: false; reason: 'missing signature' | 'bad signature' | 'expired' };

const INFO = 'switchyard signed blob urls v1';

/** The signing key, derived from the master key so that every coordinator of one installation signs alike. */
export function urlSigningKey(masterKey: Buffer): Buffer {
  return Buffer.from(hkdfSync('sha256', masterKey, Buffer.alloc(0), INFO, 32));
}

/**
 * URLs the coordinator hands to agents for blobs: HMAC-SHA256 over the method, the path (which
 * names one object) and the expiry, so a URL opens one object, for one method, until it expires.
 * Agents never see storage; the coordinator serves the URL itself (`src/http/blob-routes.ts`).
 */
export class UrlSigner {
  constructor(
    private readonly key: Buffer,
    private readonly baseUrl: () => string,
    private readonly now: () => number,
  ) {}

  sign(method: SignedMethod, path: string, ttlMs: number): string {
    const expires = this.now() + ttlMs;
    const url = new URL(path, this.baseUrl());
    url.searchParams.set('expires', String(expires));
    url.searchParams.set('signature', this.mac(method, url.pathname, expires));
    return url.toString();
  }

  /** Checks a request's `expires` and `signature` against its method and path. */
  verify(method: string, pathname: string, query: URLSearchParams): UrlVerdict {
    const rawExpires = query.get('expires') ?? '';
    const expires = Number(rawExpires);
    const given = query.get('signature');
    if (!given || !/^\d{1,16}$/.test(rawExpires)) return { ok: false, reason: 'missing signature' };
    const wanted = Buffer.from(this.mac(method, pathname, expires), 'hex');
    const actual = Buffer.from(given, 'hex');
    if (actual.length !== wanted.length || !timingSafeEqual(actual, wanted)) return { ok: false, reason: 'bad signature' };
    if (this.now() > expires) return { ok: false, reason: 'expired' };
    return { ok: true };
  }

  private mac(method: string, pathname: string, expires: number): string {
    return createHmac('sha256', this.key).update(`${method}\n${pathname}\n${expires}`).digest('hex');
  }
}
