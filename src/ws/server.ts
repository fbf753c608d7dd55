import type { Server } from 'node:http';
import type { Logger } from 'pino';
import { WebSocketServer } from 'ws';
import { parseRequestUrl } from '../../lib/request-url.ts';
import { AgentConnection, COMPRESS_FROM_BYTES } from './connection.ts';
import type { ConnectionDeps } from './connection.ts';
import { MAX_FRAME_BYTES } from './messages.ts';

const AGENT_PATHS = new Set(['/ws/agent', '/ws']);

/**
 * permessage-deflate as offered to agents, through ws's public options only: the stock agent
 * compresses every frame of 128 bytes and more; frames this coordinator sends are compressed from
 * `COMPRESS_FROM_BYTES` up. `compression: false` (the default, `SWITCHYARD_AGENT_COMPRESSION=off`) declines the
 * agent's offer: frames then go as is both ways, and no zlib work is done for agents at all.
 */
export function agentDeflateOptions(compression: boolean) {
  return compression ? { threshold: COMPRESS_FROM_BYTES, concurrencyLimit: ZLIB_CONCURRENCY } : false;
}

/**
 * Compression work on agent frames that may run at once in this process (ws's limit is one queue
 * for every socket; its default of 10 made frames of 50 busy agents wait in line for the zlib
 * threads: dispatch bench, 140 → 193 one-job runs/s). Each socket keeps one zlib stream, so this
 * bounds work in flight, not streams created.
 */
export const ZLIB_CONCURRENCY = 64;

export interface AgentServer {
  connections: Set<AgentConnection>;
  close(): Promise<void>;
}

/** Serves the agent protocol on `/ws/agent` and `/ws` of the coordinator's HTTP server. */
export function attachAgentServer(server: Server, deps: ConnectionDeps, log: Logger, compression = false): AgentServer {
  const wss = new WebSocketServer({ noServer: true, maxPayload: MAX_FRAME_BYTES, perMessageDeflate: agentDeflateOptions(compression) });
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
