import { createServer } from 'node:net';

const RESERVED_PORTS = new Set([5432]);

/** True when nothing listens on `host:port` and it is not the default Postgres port. */
export function isPortFree(port: number, host = '127.0.0.1'): Promise<boolean> {
  if (RESERVED_PORTS.has(port)) return Promise.resolve(false);
  return canBind(port, host);
}

/** True when nothing listens on `host:port` (checked by binding it briefly). */
export function canBind(port: number, host = '127.0.0.1'): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(false));
    server.listen({ port, host, exclusive: true }, () => server.close(() => resolve(true)));
  });
}

/** A TCP port the OS reports free on `host`, never the default Postgres port. */
export async function findFreePort(host = '127.0.0.1'): Promise<number> {
  for (;;) {
    const port = await new Promise<number>((resolve, reject) => {
      const server = createServer();
      server.once('error', reject);
      server.listen({ port: 0, host, exclusive: true }, () => {
        const address = server.address();
        const chosen = typeof address === 'object' && address !== null ? address.port : 0;
        server.close(() => resolve(chosen));
      });
    });
    if (port !== 0 && !RESERVED_PORTS.has(port)) return port;
  }
}
