import { createHash, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, Server } from 'node:http';
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import { WebSocketServer } from 'ws';
import type { WebSocket } from 'ws';
import type { CommittedUpdate } from '../../actors/runs/supervisor.ts';
import { parseRequestUrl } from '../../lib/request-url.ts';

export const OBSERVE_PATH = '/ws/observe';

/** A client this far behind is closed rather than buffered without bound. */
const MAX_BUFFERED_BYTES = 4 * 1024 * 1024;
const CLOSE_TOO_SLOW = 1013;

/** What `/ws/observe` sends after every committed event of a run this coordinator owns. */
export type RunUpdateFrame = { type: 'run.update' } & CommittedUpdate;

export interface ObserveDeps {
  observe: (listener: (update: CommittedUpdate) => void) => () => void;
  adminTokenHash: Buffer;
  log: Logger;
}

export interface ObserveServer {
  readonly clients: number;
  close(): Promise<void>;
}

interface Watcher {
  ws: WebSocket;
  /** Only this run's updates, when the client asked with `?runId=`. */
  runId: string | null;
}

function tokenMatches(token: string | null, expected: Buffer): boolean {
  if (!token) return false;
  return timingSafeEqual(createHash('sha256').update(token).digest(), expected);
}

function refuse(socket: Duplex, status: string): void {
  socket.end(`HTTP/1.1 ${status}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n`);
}

/**
 * Serves the live actor stream on `/ws/observe?token=<admin token>[&runId=<id>]`: one `run.update`
 * frame per committed event. Browsers cannot set headers on a WebSocket, so the token is a query
 * parameter. The supervisor is observed only while at least one client is connected.
 */
export function attachObserveServer(server: Server, deps: ObserveDeps): ObserveServer {
  const wss = new WebSocketServer({ noServer: true, maxPayload: 4096 });
  const watchers = new Set<Watcher>();
  let unsubscribe: (() => void) | null = null;

  const broadcast = (update: CommittedUpdate) => {
    const frame: RunUpdateFrame = { type: 'run.update', ...update };
    const text = JSON.stringify(frame);
    for (const watcher of watchers) {
      if (watcher.runId !== null && watcher.runId !== update.runId) continue;
      if (watcher.ws.bufferedAmount > MAX_BUFFERED_BYTES) watcher.ws.close(CLOSE_TOO_SLOW, 'observer too slow');
      else watcher.ws.send(text);
    }
  };
  const admit = (ws: WebSocket, req: IncomingMessage) => {
    const watcher: Watcher = { ws, runId: new URL(req.url ?? '/', 'http://localhost').searchParams.get('runId') };
    watchers.add(watcher);
    unsubscribe ??= deps.observe(broadcast);
    ws.on('message', () => ws.close(1008, 'this stream is read-only'));
    // A frame ws refuses (invalid UTF-8, bad opcode) is an 'error' event: unheard, it kills the process.
    ws.on('error', (error) => deps.log.info({ err: error }, 'observer socket error'));
    ws.once('close', () => {
      watchers.delete(watcher);
      if (watchers.size === 0) {
        unsubscribe?.();
        unsubscribe = null;
      }
    });
    ws.send(JSON.stringify({ type: 'observe.ready', runId: watcher.runId }));
  };
  server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    const url = parseRequestUrl(req);
    if (url?.pathname !== OBSERVE_PATH) return;
    if (!tokenMatches(url.searchParams.get('token'), deps.adminTokenHash)) {
      deps.log.info({ path: OBSERVE_PATH }, 'observer refused: missing or wrong admin token');
      refuse(socket, '401 Unauthorized');
      return;
    }
    wss.handleUpgrade(req, socket, head, (ws) => admit(ws, req));
  });
  wss.on('error', (error) => deps.log.error({ err: error }, 'observe websocket server error'));
  return {
    get clients() {
      return watchers.size;
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const { ws } of watchers) ws.close(1001, 'Coordinator shutting down');
        unsubscribe?.();
        unsubscribe = null;
        wss.close(() => resolve());
      }),
  };
}
