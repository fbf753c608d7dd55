import type { SecretMasker } from './masking.ts';

export interface LogStreamOptions {
  /** Lines per `log.chunk`. @default 50 */
  batchLines: number;
  /** Longest time a line waits for its batch. @default 100 */
  batchMs: number;
  /** Bytes forwarded for this step before the rest is dropped. @default 10 MiB */
  maxBytes: number;
}

/** A single line longer than this is cut, so one runaway line cannot fill a frame. */
const MAX_LINE_CHARS = 64 * 1024;

/**
 * The masked, batched log lines of one step (or of the runner, stepIndex -1): a batch goes out at
 * `batchLines` lines or `batchMs` after its first line, and on `close()`, with the time of its
 * first line (so the coordinator can order batches that overtook each other).
 */
export class LogStream {
  private batch: string[] = [];
  private batchStartedAt = 0;
  private timer: NodeJS.Timeout | undefined;
  private bytes = 0;
  private truncated = false;

  constructor(
    private readonly options: LogStreamOptions,
    private readonly masker: SecretMasker,
    private readonly emit: (lines: string[], firstLineAt: number) => void,
  ) {}

  get bytesStreamed(): number {
    return this.bytes;
  }

  push(rawLine: string): void {
    if (this.truncated) return;
    const cut = rawLine.length > MAX_LINE_CHARS ? `${rawLine.slice(0, MAX_LINE_CHARS)}… [line cut]` : rawLine;
    const line = this.masker.mask(cut);
    this.bytes += Buffer.byteLength(line) + 1;
    if (this.batch.length === 0) this.batchStartedAt = Date.now();
    if (this.bytes > this.options.maxBytes) {
      this.truncated = true;
      this.batch.push(`[log truncated: more than ${this.options.maxBytes} bytes]`);
      this.flush();
      return;
    }
    this.batch.push(line);
    if (this.batch.length >= this.options.batchLines) this.flush();
    else this.timer ??= setTimeout(() => this.flush(), this.options.batchMs);
  }

  flush(): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
    if (this.batch.length === 0) return;
    const lines = this.batch;
    this.batch = [];
    this.emit(lines, this.batchStartedAt);
  }

  close(): void {
    this.flush();
  }
}

/** Splits a byte stream into lines; a trailing `\r` is dropped and a last partial line is kept for `end()`. */
export class LineSplitter {
  private pending = '';
  private readonly decoder = new TextDecoder('utf-8');

  constructor(private readonly onLine: (line: string) => void) {}

  write(chunk: Buffer): void {
    const text = this.pending + this.decoder.decode(chunk, { stream: true });
    const lines = text.split('\n');
    this.pending = lines.pop() ?? '';
    for (const line of lines) this.onLine(line.endsWith('\r') ? line.slice(0, -1) : line);
  }

  end(): void {
    const rest = this.pending + this.decoder.decode();
    this.pending = '';
    if (rest !== '') this.onLine(rest.endsWith('\r') ? rest.slice(0, -1) : rest);
  }
}
