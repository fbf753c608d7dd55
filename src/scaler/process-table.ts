import { readFile, readdir } from 'node:fs/promises';

/** A process group leader whose environment carries our ownership marks (SCL-4). */
export interface MarkedProcess {
  pid: number;
  env: Record<string, string>;
}

async function readText(path: string): Promise<string | null> {
  return readFile(path, 'utf8').catch((error: NodeJS.ErrnoException) => {
    // Processes come and go while we scan; an unreadable one is simply not ours to see.
    if (error.code === 'ENOENT' || error.code === 'EACCES' || error.code === 'ESRCH' || error.code === 'EPERM') return null;
    throw error;
  });
}

/** `state` and `pgrp` from /proc/<pid>/stat (the command name may hold spaces and parentheses). */
export async function processStat(pid: number): Promise<{ state: string; pgrp: number } | null> {
  const stat = await readText(`/proc/${pid}/stat`);
  if (stat === null) return null;
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return { state: fields[0] ?? '?', pgrp: Number(fields[2]) };
}

/** Alive means present and not a zombie waiting to be reaped. */
export async function processAlive(pid: number): Promise<boolean> {
  const stat = await processStat(pid);
  return stat !== null && stat.state !== 'Z' && stat.state !== 'X';
}

function parseEnviron(raw: string): Record<string, string> {
  const env: Record<string, string> = {};
  for (const entry of raw.split('\0')) {
    const eq = entry.indexOf('=');
    if (eq > 0) env[entry.slice(0, eq)] = entry.slice(eq + 1);
  }
  return env;
}

/**
 * Live process group leaders whose environment satisfies `wanted` (Linux /proc). Only leaders:
 * an agent's job steps inherit nothing of ours, and destroy acts on whole groups.
 */
export async function findMarkedProcesses(wanted: Record<string, string>): Promise<MarkedProcess[]> {
  const entries = await readdir('/proc').catch(() => [] as string[]);
  const found: MarkedProcess[] = [];
  for (const name of entries) {
    if (!/^\d+$/.test(name)) continue;
    const pid = Number(name);
    const raw = await readText(`/proc/${pid}/environ`);
    if (raw === null || !raw.includes('SWITCHYARD_MANAGED=true')) continue;
    const env = parseEnviron(raw);
    if (!Object.entries(wanted).every(([key, value]) => env[key] === value)) continue;
    const stat = await processStat(pid);
    if (stat && stat.pgrp === pid && stat.state !== 'Z') found.push({ pid, env });
  }
  return found;
}
