import { readFile } from 'node:fs/promises';
import { canBind } from '../../src/db/free-port.ts';

/** Where the kernel gives out ports for outgoing connections (Linux; the usual default elsewhere). */
async function ephemeralRangeStart(): Promise<number> {
  const text = await readFile('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').catch(() => '32768 60999');
  const start = Number(text.trim().split(/\s+/)[0]);
  return Number.isInteger(start) && start > 2_000 ? start : 32_768;
}

/**
 * A free port below the kernel's ephemeral range, for a server a test kills and starts again on the
 * same port. A port from the ephemeral range (what port 0 gives) can be handed to an outgoing
 * connection (a database client, an agent) while the server is down, and then it cannot listen
 * there again until that connection ends: the chaos suite's restarts failed so.
 */
export async function findRestartablePort(): Promise<number> {
  const below = await ephemeralRangeStart();
  const low = Math.max(10_000, below - 12_000);
  for (let tries = 0; tries < 200; tries++) {
    const port = low + Math.floor(Math.random() * (below - low));
    if (await canBind(port)) return port;
  }
  throw new Error(`no free port in ${low}–${below - 1} after 200 tries`);
}
