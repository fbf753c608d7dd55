import { randomBytes } from 'node:crypto';
import { link, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { DataDirInUseError } from './errors.ts';
import { isProcessAlive } from './process-liveness.ts';

export interface DataDirLock {
  readonly path: string;
  release(): Promise<void>;
}

const LOCK_FILE = 'switchyard.lock';

/**
 * Takes `<dataDir>/switchyard.lock` for this process. A lock left by a dead process is taken over;
 * one held by a live process (including this one) throws DataDirInUseError. Two processes taking
 * over the same stale lock at the same instant are caught by Postgres's own postmaster.pid check.
 */
export async function acquireDataDirLock(dataDir: string): Promise<DataDirLock> {
  const path = join(dataDir, LOCK_FILE);
  for (let attempt = 0; attempt < 3; attempt++) {
    if (await tryCreate(path)) return { path, release: () => releaseIfOurs(path) };
    const holder = await readHolder(path);
    if (holder !== undefined && isProcessAlive(holder)) throw new DataDirInUseError(dataDir, holder);
    await rm(path, { force: true });
  }
  throw new Error(`Could not take the data directory lock ${path}: it keeps reappearing`);
}

/** Writes the holder to a private file first, then link()s it: the lock never exists half-written. */
async function tryCreate(path: string): Promise<boolean> {
  const draft = `${path}.${process.pid}.${randomBytes(4).toString('hex')}`;
  await writeFile(draft, JSON.stringify({ pid: process.pid, at: new Date().toISOString() }), { mode: 0o600 });
  try {
    await link(draft, path);
    return true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw error;
  } finally {
    await rm(draft, { force: true });
  }
}

async function readHolder(path: string): Promise<number | undefined> {
  try {
    const parsed: unknown = JSON.parse(await readFile(path, 'utf8'));
    if (typeof parsed === 'object' && parsed !== null && 'pid' in parsed && typeof parsed.pid === 'number') {
      return parsed.pid;
    }
    return undefined;
  } catch (error) {
    // Missing (released meanwhile) or unreadable garbage: either way nobody holds it.
    if ((error as NodeJS.ErrnoException).code === 'ENOENT' || error instanceof SyntaxError) return undefined;
    throw error;
  }
}

async function releaseIfOurs(path: string): Promise<void> {
  if ((await readHolder(path)) === process.pid) await rm(path, { force: true });
}
