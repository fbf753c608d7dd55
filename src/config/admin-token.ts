import { readFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';

/** The file in the data dir where a coordinator keeps the admin token it generated at first start. */
export const ADMIN_TOKEN_FILE = 'admin-token';

/** The data dir as `switchyard start` resolves it: `$SWITCHYARD_DATA_DIR`, else `./.switchyard`. */
export function dataDirOf(env: NodeJS.ProcessEnv): string {
  return resolve(env['SWITCHYARD_DATA_DIR'] ?? './.switchyard');
}

export function adminTokenPath(dataDir: string): string {
  return join(dataDir, ADMIN_TOKEN_FILE);
}

export type AdminTokenLookup = { ok: true; token: string } | { ok: false; reason: string };

/**
 * How a command talks to a running coordinator's admin API: `$SWITCHYARD_ADMIN_TOKEN`, else the token
 * file in the coordinator's data dir. A missing or empty file is a reason the user can act on.
 */
export async function readAdminToken(env: NodeJS.ProcessEnv): Promise<AdminTokenLookup> {
  const configured = env['SWITCHYARD_ADMIN_TOKEN']?.trim();
  if (configured) return { ok: true, token: configured };
  const path = adminTokenPath(dataDirOf(env));
  try {
    const token = (await readFile(path, 'utf8')).trim();
    return token ? { ok: true, token } : { ok: false, reason: `the admin token file ${path} is empty` };
  } catch (thrown) {
    const error = thrown as NodeJS.ErrnoException;
    const why = error.code === 'ENOENT' ? `${path} does not exist` : `cannot read ${path}: ${error.message}`;
    return { ok: false, reason: `no admin token: set SWITCHYARD_ADMIN_TOKEN, or SWITCHYARD_DATA_DIR to the coordinator's data dir (${why})` };
  }
}
