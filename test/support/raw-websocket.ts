/**
 * A WebSocket client written out by hand, for tests that must see or send what a library hides:
 * the RSV1 (compressed) bit of each frame, or compressed bytes that do not inflate. It offers
 * permessage-deflate as the stock agent does and reads unfragmented frames only.
 */
import { randomBytes } from 'node:crypto';
import { connect, type Socket } from 'node:net';
import { constants, inflateRawSync, type DeflateRaw } from 'node:zlib';

/**
 * A message as the stock agent's ws client compresses it (RFC 7692 §7.2.1): deflated on the one
 * stream its socket keeps (context takeover), sync-flushed, the trailing 00 00 ff ff cut.
 */
export function deflateAsAgent(stream: DeflateRaw, message: Buffer | string): Promise<Buffer> {
  return new Promise((resolve) => {
    const out: Buffer[] = [];
    const collect = (chunk: Buffer) => out.push(chunk);
    stream.on('data', collect);
    stream.write(message);
    stream.flush(constants.Z_SYNC_FLUSH, () => {
      stream.off('data', collect);
      resolve(Buffer.concat(out).subarray(0, -4));
    });
  });
}

export interface RawFrame {
  opcode: number;
  compressed: boolean;
  payload: Buffer;
}

export class RawWebSocket {
  readonly frames: RawFrame[] = [];
  private buffered = Buffer.alloc(0);
  private waiters: (() => void)[] = [];
  private ended = false;

  private constructor(
    private readonly socket: Socket,
    /** The `Sec-WebSocket-Extensions` the server answered with ('' if none). */
    readonly extensions: string,
  ) {
    socket.on('data', (chunk: Buffer) => this.read(chunk));
    socket.on('close', () => {
      this.ended = true;
      this.wake();
    });
  }

  static async open(url: string): Promise<RawWebSocket> {
    const { hostname, port, pathname } = new URL(url);
    const socket = connect(Number(port), hostname);
    await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject));
    socket.write(
      [`GET ${pathname} HTTP/1.1`, `Host: ${hostname}:${port}`, 'Upgrade: websocket', 'Connection: Upgrade', `Sec-WebSocket-Key: ${randomBytes(16).toString('base64')}`, 'Sec-WebSocket-Version: 13', 'Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits', '', ''].join('\r\n'),
    );
    let head = Buffer.alloc(0);
    while (!head.includes('\r\n\r\n')) head = Buffer.concat([head, await new Promise<Buffer>((resolve) => socket.once('data', resolve))]);
    const end = head.indexOf('\r\n\r\n');
    const response = head.subarray(0, end).toString();
    if (!response.startsWith('HTTP/1.1 101')) throw new Error(`no upgrade: ${response}`);
    const extensions = /^sec-websocket-extensions: (.*)$/im.exec(response)?.[1] ?? '';
    const raw = new RawWebSocket(socket, extensions);
    raw.read(head.subarray(end + 4));
    return raw;
  }

  /** Sends one masked frame: a text frame by default, with RSV1 set if `compressed`. */
  sendFrame(payload: Buffer, options: { compressed?: boolean; opcode?: number } = {}): void {
    const mask = randomBytes(4);
    const first = 0x80 | (options.compressed ? 0x40 : 0) | (options.opcode ?? 0x1);
    const length = payload.length < 126 ? Buffer.from([0x80 | payload.length]) : Buffer.from([0x80 | 126, payload.length >> 8, payload.length & 0xff]);
    if (payload.length > 0xffff) throw new Error('frames up to 64 KiB only');
    const masked = Buffer.from(payload.map((byte, i) => byte ^ (mask[i % 4] ?? 0)));
    this.socket.write(Buffer.concat([Buffer.from([first]), length, mask, masked]));
  }

  sendJson(message: object): void {
    this.sendFrame(Buffer.from(JSON.stringify(message)));
  }

  /** The next frame after the `seen` first ones; null if the socket ended first. */
  async frame(seen: number, timeoutMs = 5_000): Promise<RawFrame | null> {
    const until = Date.now() + timeoutMs;
    while (this.frames.length <= seen) {
      if (this.ended) return null;
      if (Date.now() > until) throw new Error(`no frame ${seen} within ${timeoutMs} ms`);
      await new Promise<void>((resolve) => {
        this.waiters.push(resolve);
        setTimeout(resolve, 50);
      });
    }
    return this.frames[seen] ?? null;
  }

  /** A text frame's JSON, inflated first if it came compressed (its context is not kept: tests read the first compressed one). */
  static json(frame: RawFrame): Record<string, unknown> {
    const text = frame.compressed ? inflateRawSync(Buffer.concat([frame.payload, Buffer.from([0, 0, 0xff, 0xff])]), { finishFlush: constants.Z_SYNC_FLUSH }) : frame.payload;
    return JSON.parse(text.toString()) as Record<string, unknown>;
  }

  /** The close frame's code, once the server sent it. */
  async closeCode(timeoutMs = 5_000): Promise<number | null> {
    for (let seen = 0; ; seen += 1) {
      const frame = await this.frame(seen, timeoutMs);
      if (frame === null) return null;
      if (frame.opcode === 0x8) return frame.payload.readUInt16BE(0);
    }
  }

  close(): void {
    this.socket.destroy();
  }

  private read(chunk: Buffer): void {
    this.buffered = Buffer.concat([this.buffered, chunk]);
    for (;;) {
      if (this.buffered.length < 2) break;
      const first = this.buffered[0] ?? 0;
      let length = (this.buffered[1] ?? 0) & 0x7f;
      let offset = 2;
      if (length === 126) {
        if (this.buffered.length < 4) break;
        length = this.buffered.readUInt16BE(2);
        offset = 4;
      } else if (length === 127) {
        if (this.buffered.length < 10) break;
        length = Number(this.buffered.readBigUInt64BE(2));
        offset = 10;
      }
      if (this.buffered.length < offset + length) break;
      this.frames.push({ opcode: first & 0x0f, compressed: (first & 0x40) !== 0, payload: this.buffered.subarray(offset, offset + length) });
      this.buffered = this.buffered.subarray(offset + length);
    }
    this.wake();
  }

  private wake(): void {
    for (const resolve of this.waiters.splice(0)) resolve();
  }
}
