import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { describe, it } from 'node:test';
import { createDeflateRaw, deflateRawSync } from 'node:zlib';
import { INFLATE_SLICE_BYTES, MessageInflater } from '../../../src/ws/inflate.ts';
import { deflateAsAgent as deflateMessage } from '../../support/raw-websocket.ts';

const MiB = 1024 * 1024;

function inflate(inflater: MessageInflater, data: Buffer, fin = true): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    let answered = false;
    inflater.inflate(data, fin, (error, out) => {
      answered = true;
      if (error) reject(error);
      else resolve(out ?? Buffer.alloc(0));
    });
    assert.equal(answered, false, 'never answered inside the call: ws would end the same write twice');
  });
}

/** Messages that point back into earlier ones, and some longer than the 32 KiB window. */
function messages(count: number): Buffer[] {
  return Array.from({ length: count }, (_, i) => {
    const long = i % 37 === 0 ? randomBytes(20_000).toString('base64') : '';
    return Buffer.from(JSON.stringify({ type: 'job.status', runId: `run-${i % 7}`, jobId: `job-${i % 3}`, status: ['running', 'success'][i % 2], long }));
  });
}

const closeCodeOf = (error: unknown) => Object.getOwnPropertySymbols(error).map((symbol) => (error as Record<symbol, unknown>)[symbol])[0];

describe('agent frames are inflated here, on one zlib handle per socket (src/ws/inflate.ts)', () => {
  it('a stream of messages with context takeover inflates exactly, window carried across messages past 32 KiB', async () => {
    const deflate = createDeflateRaw({ windowBits: 15 });
    const inflater = new MessageInflater({ maxPayload: 25 * MiB, contextTakeover: true });
    for (const message of messages(300)) assert.deepEqual(await inflate(inflater, await deflateMessage(deflate, message)), message);
    deflate.close();
  });

  it('a message in fragments is inflated whole at its last fragment; the fragments before answer nothing', async () => {
    const deflate = createDeflateRaw({ windowBits: 15 });
    const inflater = new MessageInflater({ maxPayload: 25 * MiB, contextTakeover: true });
    const [first, second] = messages(2) as [Buffer, Buffer];
    assert.deepEqual(await inflate(inflater, await deflateMessage(deflate, first)), first);
    const compressed = await deflateMessage(deflate, second);
    const cut = Math.floor(compressed.length / 2);
    assert.equal((await inflate(inflater, compressed.subarray(0, cut), false)).length, 0);
    assert.deepEqual(await inflate(inflater, compressed.subarray(cut)), second);
    deflate.close();
  });

  it('a message that ends its deflate stream (a final block) is inflated, and the next one starts a new stream; data past the end is refused with 1007', async () => {
    const inflater = new MessageInflater({ maxPayload: 25 * MiB, contextTakeover: true });
    const [first, second, third] = messages(3) as [Buffer, Buffer, Buffer];
    assert.deepEqual(await inflate(inflater, deflateRawSync(first)), first);
    assert.deepEqual(await inflate(inflater, deflateRawSync(second)), second);
    const deflate = createDeflateRaw({ windowBits: 15 });
    assert.deepEqual(await inflate(inflater, await deflateMessage(deflate, third)), third, 'a stream with context takeover after it');
    deflate.close();
    const trailing = new MessageInflater({ maxPayload: 25 * MiB, contextTakeover: true });
    await assert.rejects(inflate(trailing, Buffer.concat([deflateRawSync(first), Buffer.from([1, 2, 3])])), (error) => closeCodeOf(error) === 1007);
  });

  it('without context takeover each message stands alone', async () => {
    const inflater = new MessageInflater({ maxPayload: 25 * MiB, contextTakeover: false });
    for (const message of messages(20)) {
      const deflate = createDeflateRaw({ windowBits: 15 });
      assert.deepEqual(await inflate(inflater, await deflateMessage(deflate, message)), message);
      deflate.close();
    }
  });

  it(`a message that inflates past ${INFLATE_SLICE_BYTES / 1024} KiB is inflated a slice at a time, other work running between the slices, and the next one still sees its window`, async () => {
    const deflate = createDeflateRaw({ windowBits: 15 });
    const inflater = new MessageInflater({ maxPayload: 25 * MiB, contextTakeover: true });
    const inflateNoting = async (message: Buffer) => {
      const compressed = await deflateMessage(deflate, message);
      let ranBefore = false;
      const inflated = inflate(inflater, compressed);
      setImmediate(() => (ranBefore = true));
      assert.deepEqual(await inflated, message);
      return ranBefore;
    };
    const big = Buffer.from(JSON.stringify({ type: 'log.chunk', lines: [randomBytes(INFLATE_SLICE_BYTES).toString('hex')] }));
    assert.equal(await inflateNoting(big), true, 'other work ran before the message was whole');
    const after = Buffer.from(big.subarray(big.length - 2_000));
    assert.equal(await inflateNoting(after), false, 'a small message is inflated at once');
    deflate.close();
  });

  it('a socket closed between the slices of a message frees its handle, and the message is dropped', async () => {
    const deflate = createDeflateRaw({ windowBits: 15 });
    const inflater = new MessageInflater({ maxPayload: 25 * MiB, contextTakeover: true });
    const big = Buffer.from(randomBytes(4 * INFLATE_SLICE_BYTES).toString('hex'));
    let answered = false;
    inflater.inflate(await deflateMessage(deflate, big), true, () => (answered = true));
    await new Promise((resolve) => queueMicrotask(() => resolve(undefined)));
    inflater.close();
    await new Promise((resolve) => setTimeout(resolve, 50));
    assert.equal(answered, false);
    deflate.close();
  });

  it('past the cap: an error ws closes with 1009; data that does not inflate: 1007', async () => {
    const deflate = createDeflateRaw({ windowBits: 15 });
    const capped = new MessageInflater({ maxPayload: MiB, contextTakeover: true });
    await assert.rejects(inflate(capped, await deflateMessage(deflate, Buffer.alloc(2 * MiB, 'x'))), (error) => closeCodeOf(error) === 1009 && /Max payload/.test(String(error)));
    const smallCap = new MessageInflater({ maxPayload: 1_000, contextTakeover: true });
    await assert.rejects(inflate(smallCap, await deflateMessage(createDeflateRaw(), Buffer.alloc(5_000, 'y'))), (error) => closeCodeOf(error) === 1009);
    const garbage = new MessageInflater({ maxPayload: MiB, contextTakeover: true });
    await assert.rejects(inflate(garbage, Buffer.from([0xff, 0xff, 0xff, 0x13, 0x37])), (error) => closeCodeOf(error) === 1007);
    deflate.close();
  });
});
