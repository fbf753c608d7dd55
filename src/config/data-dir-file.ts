import { chmod, mkdir, readFile, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';

/**
 * A credential a coordinator keeps in its data dir (admin token, master key): the file's text when it
 * exists, else `make()` written there once (mode 0600, never over a file that appeared meanwhile).
 */
export async function readOrCreateDataDirFile(path: string, make: () => string): Promise<{ text: string; created: boolean }> {
  const existing = await readFile(path, 'utf8').catch((error: NodeJS.ErrnoException) => {
    if (error.code === 'ENOENT') return null;
    throw error;
  });
  if (existing !== null) return { text: existing, created: false };
  const text = make();
  await mkdir(dirname(path), { recursive: true });
  await writeFile(path, `${text}\n`, { mode: 0o600, flag: 'wx' });
  await chmod(path, 0o600);
  return { text, created: true };
}
