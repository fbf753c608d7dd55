import { readdirSync, readFileSync } from 'node:fs';
import { relative } from 'node:path';

/**
 * Ends the test processes of files that hold their tier: a file whose failed test left a handle open
 * (a database client, a socket) never exits, and node:test waits for it forever. (`forceExit` is no
 * cure: it ends a file before the tests it registers after a top-level `await` have run.) When no
 * test event has arrived for `silenceMs`, every file not yet ended has its process killed, which
 * node:test then reports as that file's failure.
 */
export class StallWatch {
  private readonly pending = new Set<string>();
  private lastEventAt = Date.now();
  private readonly timer: NodeJS.Timeout;

  constructor(
    private readonly silenceMs: number,
    private readonly report: (message: string) => void,
  ) {
    // Unref'd: an in-process tier ends only once nothing else keeps this process's event loop alive.
    this.timer = setInterval(() => this.check(), Math.min(silenceMs, 10_000)).unref();
  }

  /** A test event arrived; `file` ended when it is its file's summary. */
  saw(event: { readonly type: string; readonly data?: object }): void {
    this.lastEventAt = Date.now();
    const { data } = event;
    const file = data !== undefined && 'file' in data && typeof data.file === 'string' ? data.file : undefined;
    if (file === undefined) return;
    if (event.type === 'test:summary') this.pending.delete(file);
    else if (event.type === 'test:enqueue' || event.type === 'test:dequeue') this.pending.add(file);
  }

  stop(): void {
    clearInterval(this.timer);
  }

  private check(): void {
    if (Date.now() - this.lastEventAt < this.silenceMs || this.pending.size === 0) return;
    const silentFor = Math.round((Date.now() - this.lastEventAt) / 1000);
    for (const file of this.pending) {
      const pids = testProcessesOf(file);
      this.report(`${relative(process.cwd(), file)}: no test event for ${silentFor} s; its process ${pids.join(', ') || '(not found)'} is killed (a handle left open by a failed test?)`);
      for (const pid of pids) process.kill(pid, 'SIGKILL');
    }
    this.lastEventAt = Date.now();
  }
}

/** Children of this process whose command line runs `file` (Linux /proc; none elsewhere). */
function testProcessesOf(file: string): number[] {
  let entries: string[];
  try {
    entries = readdirSync('/proc').filter((name) => /^\d+$/.test(name));
  } catch {
    return [];
  }
  return entries.flatMap((name) => {
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      const parent = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      const command = readFileSync(`/proc/${name}/cmdline`, 'utf8').split('\0');
      return parent === process.pid && command.includes(file) ? [Number(name)] : [];
    } catch {
      return []; // ended meanwhile
    }
  });
}
