import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, afterEach, before, describe, it } from 'node:test';
import { constants, createDeflateRaw, type DeflateRaw } from 'node:zlib';
import { PROTOCOL_VERSION } from '../../../src/ws/messages.ts';
import { DATABASE_KINDS, skipReason } from '../../support/database.ts';
import { CoordinatorClient, dropDatabase } from '../../support/fake-agent.ts';
import { ADMIN_TOKEN, after as processCleanups, sharedDatabaseUrl, startCoordinatorProcess, stopProcess } from '../../support/processes.ts';
import type { CoordinatorProcess } from '../../support/processes.ts';
import { RawWebSocket } from '../../support/raw-websocket.ts';

/** A message as the stock agent's ws client compresses it: one deflate stream per socket, sync-flushed, trailer cut. */
function compressed(stream: DeflateRaw, message: object): Promise<Buffer> {
  return new Promise((resolve) => {
    const out: Buffer[] = [];
    const collect = (chunk: Buffer) => out.push(chunk);
    stream.on('data', collect);
    stream.write(JSON.stringify(message));
    stream.flush(constants.Z_SYNC_FLUSH, () => {
      stream.off('data', collect);
      resolve(Buffer.concat(out).subarray(0, -4));
    });
  });
}

for (const kind of DATABASE_KINDS) {
  describe(`agent socket: permessage-deflate as the stock agent uses it (${kind} Postgres)`, { skip: await skipReason(kind) }, () => {
    let databaseUrl: string;
    let coordinator: CoordinatorProcess;
    let client: CoordinatorClient;
    let token: string;
    const sockets: RawWebSocket[] = [];

    before(async () => {
      databaseUrl = await sharedDatabaseUrl(kind);
      coordinator = await startCoordinatorProcess({ DATABASE_URL: databaseUrl });
      client = new CoordinatorClient(coordinator.url, ADMIN_TOKEN);
      token = (await client.createToken()).token;
    });
    afterEach(async () => {
      for (const socket of sockets.splice(0)) socket.close();
      assert.ok(await client.healthy(), 'the coordinator still answers /healthz');
    });
    after(async () => {
      await stopProcess(coordinator);
      if (kind === 'external') await dropDatabase(databaseUrl);
      for (const fn of processCleanups.splice(0)) await fn();
    });

    async function open(): Promise<RawWebSocket> {
      const socket = await RawWebSocket.open(`${client.wsUrl}`);
      sockets.push(socket);
      assert.match(socket.extensions, /permessage-deflate/, 'the agent offer is accepted');
      return socket;
    }

    it('compressed messages that point back into earlier ones are read; the small frames sent back go uncompressed', async () => {
      const socket = await open();
      const deflate = createDeflateRaw({ windowBits: 15 });
      socket.sendFrame(await compressed(deflate, { type: 'auth.request', token, protocolVersion: PROTOCOL_VERSION }), { compressed: true });
      const agentId = `raw-${randomUUID().slice(0, 8)}`;
      const register = { type: 'agent.register', messageId: randomUUID(), agentId, labels: ['raw'], maxConcurrency: 1, properties: {}, inFlightJobs: [] };
      // The second message repeats most of the first one's bytes: it inflates only with the first one's window.
      socket.sendFrame(await compressed(deflate, register), { compressed: true });
      const authSuccess = await socket.frame(0);
      const registerAck = await socket.frame(1);
      assert.ok(authSuccess && registerAck);
      assert.deepEqual([authSuccess.compressed, registerAck.compressed], [false, false], 'frames under 16 KiB are sent as they are');
      assert.equal(RawWebSocket.json(authSuccess).type, 'auth.success');
      assert.deepEqual(RawWebSocket.json(registerAck), { type: 'register.ack', agentId, labels: ['raw'], scalerManaged: false });
      deflate.close();
    });

    it('compressed bytes that do not inflate close the socket with 1007', async () => {
      const socket = await open();
      socket.sendFrame(Buffer.from([0xff, 0xff, 0xff, 0x13, 0x37]), { compressed: true });
      assert.equal(await socket.closeCode(), 1007);
    });
  });
}
