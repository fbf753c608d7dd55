import type { Server } from 'node:http';
import type { Logger } from 'pino';
import { WebSocketServer } from 'ws';
import { parseRequestUrl } from '../../lib/request-url.ts';
import { AgentConnection } from './connection.ts';
import type { ConnectionDeps } from './connection.ts';
import { MAX_FRAME_BYTES } from './messages.ts';

const AGENT_PATHS = new Set(['/ws/agent', '/ws']);

/**
 * Compression work on agent frames that may run at once in this process (ws's limit is one queue
 * for every socket; its default of 10 made frames of 50 busy agents wait in line for the zlib
 * threads: dispatch bench, 140 → 193 one-job runs/s). Each socket keeps one zlib stream, so this
 * bounds work in flight, not streams created.
 */
export const ZLIB_CONCURRENCY = 64;

/**
 * Frames this coordinator sends are compressed from this size up (the agent's offer is accepted,
 * so its frames are inflated at any size). A dispatch of a few KiB is sent as is: deflating it here
 * and inflating it at the agent cost two trips through the zlib threads (~1 ms on the way of every
 * dispatch) to save a couple of KiB on the wire; a large frame is still compressed.
 */
export const COMPRESS_FROM_BYTES = 16 * 1024;

export interface AgentServer {
  connections: Set<AgentConnection>;
  close(): Promise<void>;
}

/** Serves the agent protocol on `/ws/agent` and `/ws` of the coordinator's HTTP server. */
export function attachAgentServer(server: Server, deps: ConnectionDeps, log: Logger): AgentServer {
  const wss = new WebSocketServer({ noServer: true, maxPayload: MAX_FRAME_BYTES, perMessageDeflate: { threshold: COMPRESS_FROM_BYTES, concurrencyLimit: ZLIB_CONCURRENCY } });
  const connections = new Set<AgentConnection>();
  server.on('upgrade', (req, socket, head) => {
    const path = parseRequestUrl(req)?.pathname;
    if (path === undefined || !AGENT_PATHS.has(path)) return;
    wss.handleUpgrade(req, socket, head, (ws) => {
      const connection = new AgentConnection(ws, deps);
      connections.add(connection);
      ws.once('close', () => connections.delete(connection));
    });
  });
  wss.on('error', (error) => log.error({ err: error }, 'agent websocket server error'));
  return {
    connections,
    close: () =>
      new Promise<void>((resolve) => {
        for (const client of wss.clients) client.close(1001, 'Coordinator shutting down');
        wss.close(() => resolve());
      }),
  };
}
