/**
 * Inflating an agent's compressed messages on the coordinator's thread, one zlib call each.
 *
 * The stock agent compresses every frame of 128 bytes and more (permessage-deflate, which the
 * coordinator accepts: spec/protocol.md §1). ws inflates a message with three writes to a zlib
 * stream (the message, the 4-byte trailer, a flush), each a round trip through the thread pool with
 * the stream machinery around it: 13.7% of a saturated coordinator's busy time in the dispatch
 * bench, for messages of a few hundred bytes. Here a message is inflated by one synchronous call
 * (~15 µs for such a message), and only a message that inflates past `INFLATE_HERE_BYTES` is
 * inflated again on the thread pool, so no message holds this thread for long.
 *
 * Context takeover: the agent's deflate stream runs on across messages, each ended by a sync flush,
 * so a message may point back into the ones before it. After a sync flush the stream is byte
 * aligned and all an inflater carries over is its window, the last 32 KiB of output: each message
 * is inflated with that window as its dictionary, which is what an inflate stream kept open would
 * hold. Under `client_no_context_takeover` no window is kept.
 *
 * ws has no public hook for its inflater. `inflateHere` replaces `_decompress` on the socket's own
 * permessage-deflate instance (ws 8.x), which ws's `decompress` calls under its concurrency limit,
 * and answers as ws's own does: the inflated bytes, or an error carrying the close code ws closes
 * with (1009 past the frame cap, 1007 for data that does not inflate). A socket whose extension
 * does not have that shape keeps ws's inflater.
 */
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { constants, inflateRaw, inflateRawSync, type ZlibOptions } from 'node:zlib';
import type { WebSocket } from 'ws';

const TRAILER = Buffer.from([0x00, 0x00, 0xff, 0xff]);
const NOTHING = Buffer.alloc(0);
/** The largest window permessage-deflate allows (2^15); an agent that negotiated less points back less far. */
const WINDOW_BYTES = 32 * 1024;
/** A message that inflates to more than this is inflated again on the thread pool (~0.3 ms of work here at most). */
export const INFLATE_HERE_BYTES = 256 * 1024;

/** The symbol ws reads an error's close code from (`kStatusCode` of ws/lib/constants.js, not exported); null if this ws has none. */
const STATUS_CODE: symbol | null = (() => {
  try {
    const require = createRequire(import.meta.url);
    const wsConstants = require(join(dirname(require.resolve('ws')), 'lib', 'constants.js')) as { kStatusCode?: unknown };
    return typeof wsConstants.kStatusCode === 'symbol' ? wsConstants.kStatusCode : null;
  } catch {
    return null; // another layout: ws inflates as it always did
  }
})();

type Inflated = (error: Error | null, data?: Buffer) => void;

interface DeflateExtension {
  params: Record<string, unknown>;
  _maxPayload: number;
  _decompress: (data: Buffer, fin: boolean, callback: Inflated) => void;
}

/** Gives `socket` this inflater if it negotiated permessage-deflate; false if ws's own stays. */
export function inflateHere(socket: WebSocket): boolean {
  const extensions = (socket as unknown as { _extensions?: Record<string, unknown> })._extensions;
  const extension = extensions?.['permessage-deflate'] as Partial<DeflateExtension> | undefined;
  if (extension === undefined) return true; // nothing to inflate
  if (STATUS_CODE === null || typeof extension._decompress !== 'function' || typeof extension.params !== 'object' || typeof extension._maxPayload !== 'number') return false;
  const inflater = new MessageInflater({ maxPayload: extension._maxPayload, contextTakeover: extension.params.client_no_context_takeover !== true });
  extension._decompress = (data, fin, callback) => inflater.inflate(data, fin, callback);
  return true;
}

/** One socket's inflater. ws hands it one fragment at a time and waits for the answer. */
export class MessageInflater {
  /** The last output, ending at `end`; its last `WINDOW_BYTES` are the window. Twice that, so appending rarely moves it. */
  private readonly history = Buffer.allocUnsafe(2 * WINDOW_BYTES);
  private end = 0;
  private fragments: Buffer[] = [];

  /** `maxPayload` as ws takes it: below 1, no cap. */
  constructor(private readonly options: { maxPayload: number; contextTakeover: boolean }) {}

  /**
   * Answers on a later microtask, as ws's own inflater answers later: ws's receiver runs its frame
   * loop again from the answer, and would end the same write twice if answered inside the call.
   */
  inflate(data: Buffer, fin: boolean, callback: Inflated): void {
    if (!fin) {
      // A fragment may end inside a deflate block: the message is inflated whole at its last one.
      this.fragments.push(data);
      queueMicrotask(() => callback(null, NOTHING));
      return;
    }
    const message = Buffer.concat([...this.fragments, data, TRAILER]);
    this.fragments = [];
    const cap = this.options.maxPayload > 0 ? this.options.maxPayload : Number.MAX_SAFE_INTEGER;
    let inflated: Buffer;
    try {
      inflated = inflateRawSync(message, this.zlibOptions(Math.min(cap, INFLATE_HERE_BYTES)));
    } catch (error) {
      if (!tooLarge(error) || cap <= INFLATE_HERE_BYTES) return queueMicrotask(() => callback(closeError(error)));
      inflateRaw(message, this.zlibOptions(cap), (failed, result) => (failed ? callback(closeError(failed)) : callback(null, this.remember(result))));
      return;
    }
    queueMicrotask(() => callback(null, this.remember(inflated)));
  }

  private zlibOptions(maxOutputLength: number): ZlibOptions {
    const window = this.history.subarray(Math.max(0, this.end - WINDOW_BYTES), this.end);
    return { finishFlush: constants.Z_SYNC_FLUSH, maxOutputLength, ...(window.length > 0 ? { dictionary: window } : {}) };
  }

  /** Keeps the message's bytes as the next message's window. */
  private remember(output: Buffer): Buffer {
    if (!this.options.contextTakeover) return output;
    if (output.length >= WINDOW_BYTES) {
      output.copy(this.history, 0, output.length - WINDOW_BYTES);
      this.end = WINDOW_BYTES;
      return output;
    }
    if (this.end + output.length > this.history.length) {
      this.history.copy(this.history, 0, this.end - WINDOW_BYTES, this.end);
      this.end = WINDOW_BYTES;
    }
    output.copy(this.history, this.end);
    this.end += output.length;
    return output;
  }
}

function tooLarge(error: unknown): boolean {
  return error instanceof RangeError && (error as { code?: unknown }).code === 'ERR_BUFFER_TOO_LARGE';
}

/** The error ws closes the socket with: 1009 for a message past the cap, 1007 for data that does not inflate. */
function closeError(thrown: unknown): Error {
  const pastCap = tooLarge(thrown);
  const error = pastCap
    ? Object.assign(new RangeError('Max payload size exceeded'), { code: 'WS_ERR_UNSUPPORTED_MESSAGE_LENGTH' })
    : thrown instanceof Error
      ? thrown
      : new Error(String(thrown));
  if (STATUS_CODE !== null) Object.defineProperty(error, STATUS_CODE, { value: pastCap ? 1009 : 1007 });
  return error;
}
