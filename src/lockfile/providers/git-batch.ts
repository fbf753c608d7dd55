import { spawn } from 'node:child_process';
import type { ChildProcessWithoutNullStreams } from 'node:child_process';
import { gitEnvironment } from './local-git.ts';

/** What `git cat-file --batch` answered; `content` is null for an object over the size limit (its bytes are skipped, never held). */
export type BatchObject = { kind: 'object'; type: string; size: number; content: Buffer | null } | { kind: 'missing' } | { kind: 'failed'; detail: string };

/** A reader left unused this long stops its git process; the next read starts another. */
const IDLE_MS = 30_000;

/** One running `git cat-file --batch` and the answers it still owes, in request order. */
class BatchProcess {
  readonly pending: ((object: BatchObject) => void)[] = [];
  private buffer: Buffer = Buffer.alloc(0);
  /** Bytes of an oversized object (and its newline) still to be dropped. */
  private skipping = 0;
  private stderr = '';

  constructor(
    readonly child: ChildProcessWithoutNullStreams,
    private readonly maxBytes: number,
    private readonly onIdle: () => void,
  ) {
    child.stdout.on('data', (chunk: Buffer) => this.receive(chunk));
    child.stderr.on('data', (chunk: Buffer) => void (this.stderr = (this.stderr + chunk.toString('utf8')).slice(-2000)));
    child.stdin.on('error', () => undefined);
    this.keepAlive(false);
  }

  /** Asks git for `name`; while answers are owed the process keeps the event loop alive, idle it does not. */
  ask(name: string, resolve: (object: BatchObject) => void): void {
    if (this.pending.length === 0) this.keepAlive(true);
    this.pending.push(resolve);
    this.child.stdin.write(`${name}\n`);
  }

  private keepAlive(on: boolean): void {
    const handles = [this.child, this.child.stdin, this.child.stdout, this.child.stderr] as unknown as { ref?: () => void; unref?: () => void }[];
    for (const handle of handles) (on ? handle.ref : handle.unref)?.call(handle);
  }

  fail(detail: string): void {
    this.keepAlive(false);
    for (const resolve of this.pending.splice(0)) resolve({ kind: 'failed', detail: `${detail}${this.stderr ? `: ${this.stderr.trim()}` : ''}` });
  }

  /** `<oid> <type> <size>\n<content>\n` or `<name> missing\n` (also `ambiguous`). */
  private receive(received: Buffer): void {
    let chunk = received;
    if (this.skipping > 0) {
      const dropped = Math.min(this.skipping, chunk.length);
      this.skipping -= dropped;
      chunk = chunk.subarray(dropped);
    }
    this.buffer = this.buffer.length === 0 ? chunk : Buffer.concat([this.buffer, chunk]);
    while (this.skipping === 0) {
      const eol = this.buffer.indexOf(10);
      if (eol < 0) return;
      const object = /^\S+ (\S+) (\d+)$/.exec(this.buffer.subarray(0, eol).toString('utf8'));
      if (object === null) {
        this.buffer = this.buffer.subarray(eol + 1);
        this.settle({ kind: 'missing' });
        continue;
      }
      const [type, size] = [object[1] ?? '', Number(object[2])];
      if (size > this.maxBytes) {
        const available = Math.min(this.buffer.length - eol - 1, size + 1);
        this.skipping = size + 1 - available;
        this.buffer = this.buffer.subarray(eol + 1 + available);
        this.settle({ kind: 'object', type, size, content: null });
        continue;
      }
      if (this.buffer.length < eol + 1 + size + 1) return;
      const content = Buffer.from(this.buffer.subarray(eol + 1, eol + 1 + size));
      this.buffer = this.buffer.subarray(eol + 1 + size + 1);
      this.settle({ kind: 'object', type, size, content });
    }
  }

  private settle(object: BatchObject): void {
    this.pending.shift()?.(object);
    if (this.pending.length > 0) return;
    this.keepAlive(false);
    this.onIdle();
  }
}

/**
 * One long-lived `git cat-file --batch` for a repository: reading an object is a line written to a
 * running process instead of a process started (docs/architecture.md#one-delivery-from-webhook-to-finished-run).
 * Names go one per line, so a name with a line break or a NUL is refused before it reaches git.
 */
export class GitObjectReader {
  private current: BatchProcess | null = null;
  private idle: NodeJS.Timeout | null = null;

  constructor(
    private readonly path: string,
    private readonly maxBytes: number,
  ) {}

  read(name: string): Promise<BatchObject> {
    if (/[\n\r\0]/.test(name)) return Promise.resolve({ kind: 'failed', detail: `object name ${JSON.stringify(name)} has a line break or NUL` });
    const batch = this.process();
    if (this.idle) clearTimeout(this.idle);
    this.idle = null;
    return new Promise((resolve) => batch.ask(name, resolve));
  }

  /** Ends the git process once it has answered what it was asked. */
  close(): void {
    if (this.idle) clearTimeout(this.idle);
    this.idle = null;
    this.current?.child.stdin.end();
    this.current = null;
  }

  private process(): BatchProcess {
    if (this.current) return this.current;
    const child = spawn('git', ['-C', this.path, 'cat-file', '--batch'], { env: gitEnvironment(), stdio: ['pipe', 'pipe', 'pipe'] });
    const batch = new BatchProcess(child, this.maxBytes, () => {
      if (this.current === batch) this.idle = setTimeout(() => this.close(), IDLE_MS).unref();
    });
    const ended = (detail: string) => {
      if (this.current === batch) this.current = null;
      batch.fail(detail);
    };
    child.on('error', (error) => ended(`git cat-file --batch in ${this.path}: ${error.message}`));
    child.on('close', (code) => ended(`git cat-file --batch in ${this.path} exited with ${code}`));
    this.current = batch;
    return batch;
  }
}

const readers = new Map<string, GitObjectReader>();

/** The reader of the repository at `path`, shared by every delivery of that repository. */
export function objectReaderFor(path: string, maxBytes: number): GitObjectReader {
  let reader = readers.get(path);
  if (!reader) readers.set(path, (reader = new GitObjectReader(path, maxBytes)));
  return reader;
}

/** Stops every reader's git process (coordinator stop). */
export function closeObjectReaders(): void {
  for (const reader of readers.values()) reader.close();
  readers.clear();
}
