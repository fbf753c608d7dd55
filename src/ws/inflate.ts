/**
 * Inflating an agent's compressed messages on the coordinator's thread.
 *
 * The stock agent compresses every frame of 128 bytes and more (permessage-deflate, which the
 * coordinator accepts: spec/protocol.md §1). ws inflates a message with three writes to a zlib
 * stream (the message, the 4-byte trailer, a flush), each a round trip through the thread pool with
 * the stream machinery around it: 13.7% of a saturated coordinator's busy time in the dispatch
 * bench, for messages of a few hundred bytes. Here each socket keeps one zlib inflate handle, and a
 * message is inflated by synchronous calls on it (a few µs for such a message). A message that
 * inflates to more than `INFLATE_SLICE_BYTES` is inflated a slice at a time, other work running
 * between the slices, so no message holds this thread for long.
 *
 * Context takeover: the agent's deflate stream runs on across messages, each ended by a sync flush,
 * so a message may point back into the ones before it; the kept handle holds that window as an
 * inflate stream does. Under `client_no_context_takeover` the handle is reset before each message.
 * (Before, each message got a new handle with the last 32 KiB of output as its dictionary: making
 * the handle and loading the window took 5% of a coordinator busy with 4-job runs.)
 *
 * Neither ws nor zlib has a public hook for this. `inflateHere` replaces `_decompress` on the
 * socket's own permessage-deflate instance (ws 8.x), which ws's `decompress` calls under its
 * concurrency limit, and answers as ws's own does: the inflated bytes, or an error carrying the close
 * code ws closes with (1009 past the frame cap, 1007 for data that does not inflate). The handle is
 * driven as zlib's own synchronous calls drive it (`_handle.writeSync`, `_writeState`). A socket whose
 * extension or zlib does not have that shape keeps ws's inflater.
 */
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { constants, createInflateRaw, type InflateRaw } from 'node:zlib';
import type { WebSocket } from 'ws';

const TRAILER = Buffer.from([0x00, 0x00, 0xff, 0xff]);
const NOTHING = Buffer.alloc(0);
/** At most this much of a message is inflated in one turn of the event loop (~0.3 ms of work here). */
export const INFLATE_SLICE_BYTES = 256 * 1024;
/** Where each zlib call writes; its output is copied out at once, so every socket shares it. */
const SCRATCH = Buffer.allocUnsafe(64 * 1024);

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
  cleanup: () => void;
}

/** What zlib's synchronous calls use of a stream: its native handle and the two counts it writes back. */
interface ZlibHandle {
  writeSync(flush: number, input: Buffer, inOffset: number, inLength: number, output: Buffer, outOffset: number, outLength: number): void;
  reset(): void;
}

/** The stream's handle when this Node's zlib has the shape driven here, else null. */
function handleOf(stream: InflateRaw): { handle: ZlibHandle; state: Uint32Array } | null {
  const internals = stream as unknown as { _handle?: Partial<ZlibHandle>; _writeState?: unknown };
  const handle = internals._handle;
  const state = internals._writeState;
  if (typeof handle?.writeSync !== 'function' || typeof handle.reset !== 'function' || !(state instanceof Uint32Array) || state.length < 2) return null;
  return { handle: handle as ZlibHandle, state };
}

/** Gives `socket` this inflater if it negotiated permessage-deflate; false if ws's own stays. */
export function inflateHere(socket: WebSocket): boolean {
  const extensions = (socket as unknown as { _extensions?: Record<string, unknown> })._extensions;
  const extension = extensions?.['permessage-deflate'] as Partial<DeflateExtension> | undefined;
  if (extension === undefined) return true; // nothing to inflate
  if (STATUS_CODE === null || typeof extension._decompress !== 'function' || typeof extension.cleanup !== 'function') return false;
  if (typeof extension.params !== 'object' || typeof extension._maxPayload !== 'number' || !MessageInflater.supported) return false;
  const inflater = new MessageInflater({ maxPayload: extension._maxPayload, contextTakeover: extension.params.client_no_context_takeover !== true });
  extension._decompress = (data, fin, callback) => inflater.inflate(data, fin, callback);
  const cleanup = extension.cleanup.bind(extension);
  extension.cleanup = () => {
    inflater.close();
    cleanup();
  };
  return true;
}

/** One socket's inflater. ws hands it one fragment at a time and waits for the answer. */
export class MessageInflater {
  /** Whether this Node's zlib has the shape driven here. */
  static readonly supported = (() => {
    const probe = createInflateRaw();
    const ok = handleOf(probe) !== null;
    probe.close();
    return ok;
  })();

  private stream: InflateRaw | null = null;
  private zlib: { handle: ZlibHandle; state: Uint32Array } | null = null;
  /** Set once a message failed: the stream's window is lost, and ws closes the socket. */
  private failed: Error | null = null;
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
    const zlib = this.failed === null ? this.open() : null;
    if (zlib === null) {
      const why = this.failed === null ? 'no zlib inflate handle' : `an earlier message did not inflate (${this.failed.message})`;
      return queueMicrotask(() => callback(notInflatedError(new Error(why))));
    }
    if (!this.options.contextTakeover) zlib.handle.reset();
    const cap = this.options.maxPayload > 0 ? this.options.maxPayload : Number.MAX_SAFE_INTEGER;
    const run = new InflateRun(message, cap);
    const slice = () => {
      // The socket closed between slices: ws has let go of the message.
      if (this.zlib !== zlib) return;
      const done = this.inflateSlice(zlib, run);
      if (done === 'more') return setImmediate(slice);
      if (done instanceof Error) {
        this.failed = done;
        this.close();
        return callback(done);
      }
      callback(null, run.output());
    };
    queueMicrotask(slice);
  }

  /** Frees the zlib handle (the socket closed). */
  close(): void {
    this.stream?.close();
    this.stream = null;
    this.zlib = null;
  }

  private open(): { handle: ZlibHandle; state: Uint32Array } | null {
    if (this.zlib !== null) return this.zlib;
    const stream = createInflateRaw();
    // A failed call destroys the stream, which then emits the error; it is read from `errored` instead.
    stream.on('error', () => {});
    this.stream = stream;
    this.zlib = handleOf(stream);
    return this.zlib;
  }

  /** Inflates up to a slice of the message: 'more' when some is left for the next turn, the error ws closes with, or 'done'. */
  private inflateSlice(zlib: { handle: ZlibHandle; state: Uint32Array }, run: InflateRun): 'done' | 'more' | Error {
    const stream = this.stream as InflateRaw;
    let sliced = 0;
    for (;;) {
      zlib.handle.writeSync(constants.Z_SYNC_FLUSH, run.message, run.inOffset, run.inLeft, SCRATCH, 0, SCRATCH.length);
      if (stream.destroyed) return notInflatedError(stream.errored ?? new Error('zlib closed the inflate stream'));
      const outLeft = zlib.state[0] as number;
      const inLeft = zlib.state[1] as number;
      const produced = SCRATCH.length - outLeft;
      run.inOffset += run.inLeft - inLeft;
      run.inLeft = inLeft;
      if (produced > 0 && !run.add(SCRATCH.subarray(0, produced))) return pastCapError();
      sliced += produced;
      // Room left in the output: all input is consumed and flushed, or the deflate stream ended.
      if (outLeft !== 0) return run.inLeft === 0 ? 'done' : endOfStream(zlib, run);
      if (sliced >= INFLATE_SLICE_BYTES) return 'more';
    }
  }
}

/**
 * The message ended its deflate stream (a final block): the agent's next message starts a new one,
 * with no window. Only the trailer added here may follow the final block.
 */
function endOfStream(zlib: { handle: ZlibHandle }, run: InflateRun): 'done' | Error {
  zlib.handle.reset();
  const rest = run.message.subarray(run.inOffset);
  return rest.equals(TRAILER) ? 'done' : notInflatedError(new Error('compressed data goes on past the end of its deflate stream'));
}

/** One message being inflated: where its input stands and what it gave so far. */
class InflateRun {
  inOffset = 0;
  inLeft: number;
  private readonly parts: Buffer[] = [];
  private length = 0;

  constructor(
    readonly message: Buffer,
    readonly cap: number,
  ) {
    this.inLeft = message.length;
  }

  /** Keeps a copy of `bytes`; false when the message grows past the cap. */
  add(bytes: Buffer): boolean {
    this.length += bytes.length;
    if (this.length > this.cap) return false;
    this.parts.push(Buffer.from(bytes));
    return true;
  }

  output(): Buffer {
    return this.parts.length === 1 ? (this.parts[0] as Buffer) : Buffer.concat(this.parts, this.length);
  }
}

/** The error ws closes the socket with for a message past the frame cap: 1009. */
function pastCapError(): Error {
  return withCloseCode(Object.assign(new RangeError('Max payload size exceeded'), { code: 'WS_ERR_UNSUPPORTED_MESSAGE_LENGTH' }), 1009);
}

/** The error ws closes the socket with for data that does not inflate: 1007. */
function notInflatedError(error: Error): Error {
  return withCloseCode(error, 1007);
}

function withCloseCode(error: Error, code: number): Error {
  if (STATUS_CODE !== null) Object.defineProperty(error, STATUS_CODE, { value: code });
  return error;
}
