import { randomBytes } from 'node:crypto';
import { stat } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from 'pino';
import type { CompiledConfig } from '../config/index.ts';
import { ConfigError } from '../config/index.ts';
import { readOrCreateDataDirFile } from '../config/data-dir-file.ts';
import { parseMasterKey } from './crypto.ts';
import type { MasterKeys } from './crypto.ts';

/** Where an embedded coordinator keeps the master key it generated (docs/http-api.md#secrets). */
export const SECRET_KEY_FILE = 'secret-key';

export function secretKeyPath(dataDir: string): string {
  return join(dataDir, SECRET_KEY_FILE);
}

/**
 * The configuration with its master key: `SWITCHYARD_SECRET_KEY` when set; in the embedded mode (no
 * `DATABASE_URL`) the key in `<dataDir>/secret-key`, generated there (mode 0600) at first start and
 * reused after; with an external database and no key, none (secrets are unavailable).
 */
export async function withSecretKey(config: CompiledConfig, log: Logger): Promise<CompiledConfig> {
  if (config.secretKey !== undefined || config.databaseUrl !== undefined) return config;
  const path = secretKeyPath(config.dataDir);
  const { text, created } = await readOrCreateDataDirFile(path, () => randomBytes(32).toString('hex'));
  if (created) log.warn({ path, mode: ((await stat(path)).mode & 0o777).toString(8) }, 'generated the master key of stored secrets; back it up with the data dir');
  try {
    return { ...config, secretKey: parseMasterKey(text) };
  } catch (thrown) {
    throw new ConfigError('SWITCHYARD_SECRET_KEY', `Invalid master key file ${path}: ${thrown instanceof Error ? thrown.message : String(thrown)}`);
  }
}

/** The keys sealing and opening stored secrets, or null when none is configured. */
export function masterKeysOf(config: Pick<CompiledConfig, 'secretKey' | 'secretKeyOld'>): MasterKeys | null {
  if (config.secretKey === undefined) return null;
  return { current: config.secretKey, old: config.secretKeyOld ?? null };
}
