import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { adminTokenPath } from '../config/admin-token.ts';
import { readOrCreateDataDirFile } from '../config/data-dir-file.ts';
import type { Logger } from 'pino';
import { HttpError } from './respond.ts';
import type { IncomingMessage } from 'node:http';

function sha256(value: string): Buffer {
  return createHash('sha256').update(value).digest();
}

/**
 * The admin API token: from configuration, or generated at first start into
 * `<dataDir>/admin-token` (mode 0600). Only its SHA-256 is kept in memory.
 */
export async function loadAdminTokenHash(configured: string | undefined, dataDir: string, log: Logger): Promise<Buffer> {
  if (configured) return sha256(configured);
  const path = adminTokenPath(dataDir);
  const { text, created } = await readOrCreateDataDirFile(path, () => `sya_${randomBytes(32).toString('hex')}`);
  const token = text.trim();
  if (created) {
    log.warn({ path }, 'generated an admin API token; it is shown once here and kept in the data dir');
    process.stderr.write(`\nSwitchyard admin token (also in ${path}):\n  ${token}\n\n`);
  }
  return sha256(token);
}

/** Where a user finds the admin token the runs page asks for, in words for the ready line. */
export function adminTokenHint(config: { adminToken: string | undefined; dataDir: string }): string {
  return config.adminToken ? 'the value of SWITCHYARD_ADMIN_TOKEN' : `in ${adminTokenPath(config.dataDir)}`;
}

export function requireAdmin(req: IncomingMessage, expectedHash: Buffer): void {
  const header = req.headers.authorization ?? '';
  const match = /^Bearer\s+(\S+)$/i.exec(header);
  if (!match?.[1] || !timingSafeEqual(sha256(match[1]), expectedHash)) {
    throw new HttpError(401, 'unauthorized', 'a valid admin bearer token is required');
  }
}
