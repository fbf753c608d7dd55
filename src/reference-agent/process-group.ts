import { spawn } from 'node:child_process';
import { LineSplitter } from './log-stream.ts';

/** Why a running process is being stopped; `force` skips the grace period. */
export interface StopRequest {
  kind: 'cancel' | 'job_timeout' | 'fail_fast' | 'shutdown';
  force: boolean;
  message: string;
}

export interface ProcessSpec {
  argv: readonly [string, ...string[]];
  cwd: string;
  env: Record<string, string>;
  onLine: (line: string) => void;
  /** Stops the process: SIGTERM to its group, SIGKILL after `graceMs` (at once when `force`). */
  signal: AbortSignal;
  graceMs: number;
  /** Own deadline (step `timeout`), handled like a graceful stop. */
  timeoutMs?: number;
  /** Called with the group id once spawned, so the job can kill leftovers at its end. */
  onSpawn?: (pgid: number) => void;
}

export interface ProcessResult {
  exitCode: number | null;
  signal: NodeJS.Signals | null;
  timedOut: boolean;
  /** Set when the process could not be started (e.g. the shell does not exist). */
  spawnError?: string;
}

/** How long output may still arrive after the shell exited, from children that kept its stdout. */
const DRAIN_AFTER_EXIT_MS = 200;

/** Sends `signal` to a whole process group; a group that is already gone is not an error. */
export function signalGroup(pgid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pgid, signal);
  } catch (thrown: unknown) {
    if ((thrown as NodeJS.ErrnoException).code !== 'ESRCH') throw thrown;
  }
}

/**
 * Runs one command as the leader of a new process group (detached = setsid), so stopping it
 * reaches every process it started. stdout and stderr are delivered line by line.
 */
export function runInProcessGroup(spec: ProcessSpec): Promise<ProcessResult> {
  return new Promise((resolve) => {
    const [command, ...args] = spec.argv;
    const child = spawn(command, args, { cwd: spec.cwd, env: spec.env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
    let timedOut = false;
    let killTimer: NodeJS.Timeout | undefined;
    const stop = (force: boolean) => {
      const pgid = child.pid;
      if (pgid === undefined) return;
      signalGroup(pgid, force ? 'SIGKILL' : 'SIGTERM');
      if (!force) killTimer ??= setTimeout(() => signalGroup(pgid, 'SIGKILL'), spec.graceMs);
    };
    const onAbort = () => stop((spec.signal.reason as StopRequest | undefined)?.force === true);
    const onDeadline = () => {
      timedOut = true;
      stop(false);
    };
    const deadline = spec.timeoutMs === undefined ? undefined : setTimeout(onDeadline, spec.timeoutMs);
    const splitters = [child.stdout, child.stderr].map((stream) => {
      const splitter = new LineSplitter(spec.onLine);
      stream.on('data', (chunk: Buffer) => splitter.write(chunk));
      return splitter;
    });
    let done = false;
    const finish = (result: ProcessResult) => {
      if (done) return;
      done = true;
      clearTimeout(deadline);
      clearTimeout(killTimer);
      spec.signal.removeEventListener('abort', onAbort);
      for (const splitter of splitters) splitter.end();
      resolve(result);
    };
    child.once('error', (error) => finish({ exitCode: null, signal: null, timedOut, spawnError: error.message }));
    child.once('spawn', () => {
      if (child.pid !== undefined) spec.onSpawn?.(child.pid);
      if (spec.signal.aborted) onAbort();
      else spec.signal.addEventListener('abort', onAbort, { once: true });
    });
    child.once('exit', (exitCode, signal) => {
      const drained = setTimeout(() => {
        child.stdout.destroy();
        child.stderr.destroy();
        finish({ exitCode, signal, timedOut });
      }, DRAIN_AFTER_EXIT_MS);
      child.once('close', () => {
        clearTimeout(drained);
        finish({ exitCode, signal, timedOut });
      });
    });
  });
}
