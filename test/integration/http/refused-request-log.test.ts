import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { describe, it } from 'node:test';
import { Router } from '../../../src/http/router.ts';
import { createHttpServer, listen } from '../../../src/http/server.ts';
import { createLogger } from '../../../src/log.ts';
import { attachObserveServer } from '../../../src/ws/observe.ts';
import { WebSocket } from 'ws';

const ADMIN = 'sya_the-real-admin-token';
const WRONG = 'sya_a-guessed-token-0123';

function upgradeStatus(url: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url);
    ws.once('unexpected-response', (_req, res) => {
      resolve(res.statusCode ?? 0);
      ws.terminate();
    });
    ws.once('open', () => reject(new Error('the upgrade was accepted')));
    ws.once('error', () => {});
  });
}

describe('refused requests are logged without their tokens', () => {
  it('a 401 and a 404 whose URL carries ?token=sya_… log the URL with the token masked', async () => {
    const lines: string[] = [];
    const log = createLogger('info', {}, { format: 'json', destination: { write: (line: string) => lines.push(line) } });
    const adminTokenHash = createHash('sha256').update(ADMIN).digest();
    const server = createHttpServer({ router: new Router(), adminTokenHash, log });
    const observers = attachObserveServer(server, { observe: () => () => {}, adminTokenHash, log });
    const port = await listen(server, 0, '127.0.0.1');
    try {
      const base = `http://127.0.0.1:${port}`;
      assert.equal((await fetch(`${base}/api/v1/runs?token=${WRONG}`)).status, 401);
      assert.equal((await fetch(`${base}/nowhere?runId=r&token=${ADMIN}`)).status, 404);
      // A WebSocket upgrade to the observe stream with a wrong token is refused too.
      assert.equal(await upgradeStatus(`ws://127.0.0.1:${port}/ws/observe?token=${WRONG}`), 401);
      const refused = lines.map((line) => JSON.parse(line) as { msg: string; path?: string }).filter((r) => /refused/.test(r.msg));
      assert.deepEqual(refused.map((r) => r.path), ['/api/v1/runs?token=***', '/nowhere?runId=r&token=***', '/ws/observe']);
      assert.ok(!lines.join('').includes('sya_'), lines.join(''));
    } finally {
      await observers.close();
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  });
});
