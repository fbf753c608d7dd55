import { execFileSync, spawn } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';

export interface GitHttpServer {
  url: (repo: string) => string;
  /** Every `Authorization` header the server saw, decoded. */
  authorizations: string[];
  close: () => Promise<void>;
}

/**
 * Smart-HTTP git over git-http-backend (CGI) behind Basic auth: the same 401 → askpass → retry
 * dance a real https host does, on loopback.
 */
export async function startGitHttpServer(root: string, credentials: { user: string; secret: string }): Promise<GitHttpServer> {
  const backend = join(execFileSync('git', ['--exec-path'], { encoding: 'utf8' }).trim(), 'git-http-backend');
  const authorizations: string[] = [];
  const expected = `${credentials.user}:${credentials.secret}`;
  const server: Server = createServer((req, res) => {
    const header = req.headers.authorization ?? '';
    const decoded = header.startsWith('Basic ') ? Buffer.from(header.slice(6), 'base64').toString() : '';
    if (decoded !== '') authorizations.push(decoded);
    if (decoded !== expected) {
      res.writeHead(401, { 'WWW-Authenticate': 'Basic realm="git"' }).end();
      return;
    }
    const url = new URL(req.url ?? '/', 'http://localhost');
    const cgi = spawn(backend, [], {
      env: {
        GIT_PROJECT_ROOT: root,
        GIT_HTTP_EXPORT_ALL: '1',
        PATH_INFO: url.pathname,
        QUERY_STRING: url.search.slice(1),
        REQUEST_METHOD: req.method ?? 'GET',
        CONTENT_TYPE: req.headers['content-type'] ?? '',
        REMOTE_USER: credentials.user,
        GIT_PROTOCOL: String(req.headers['git-protocol'] ?? ''),
      },
    });
    req.pipe(cgi.stdin);
    let head = Buffer.alloc(0);
    let headersSent = false;
    cgi.stdout.on('data', (chunk: Buffer) => {
      if (headersSent) return void res.write(chunk);
      head = Buffer.concat([head, chunk]);
      const end = head.indexOf('\r\n\r\n');
      if (end < 0) return;
      headersSent = true;
      const lines = head.subarray(0, end).toString().split('\r\n');
      let status = 200;
      for (const line of lines) {
        const [name, ...rest] = line.split(':');
        const value = rest.join(':').trim();
        if (name?.toLowerCase() === 'status') status = Number.parseInt(value, 10);
        else if (name !== undefined) res.setHeader(name, value);
      }
      res.writeHead(status);
      res.write(head.subarray(end + 4));
    });
    cgi.stdout.on('end', () => res.end());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    url: (repo) => `http://127.0.0.1:${port}/${repo}`,
    authorizations,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}
