import { createServer } from 'node:http';
import type { IncomingHttpHeaders, Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, beforeEach } from 'node:test';

/** What the emulated GitHub answers on one path (with its query). */
export interface Answer {
  status: number;
  body?: string | Buffer;
  contentType?: string;
  /** Wait before the status line. */
  delayMs?: number;
  /** Send the headers, then stall the body. */
  stallBody?: boolean;
}

/** A GitHub REST peer on 127.0.0.1: answers from a table keyed by path and query; unknown paths are 404. */
export class GitHubPeer {
  readonly answers = new Map<string, Answer>();
  readonly requests: { url: string; headers: IncomingHttpHeaders }[] = [];
  #server: Server | null = null;

  async start(): Promise<string> {
    this.#server = createServer((request, response) => {
      const url = request.url ?? '';
      this.requests.push({ url, headers: request.headers });
      const answer = this.answers.get(url) ?? { status: 404, body: JSON.stringify({ message: 'Not Found' }) };
      response.on('error', () => response.destroy());
      setTimeout(() => {
        response.writeHead(answer.status, { 'content-type': answer.contentType ?? 'application/json; charset=utf-8' });
        if (answer.stallBody === true) response.write('{"schemaVersion":');
        else response.end(answer.body ?? '');
      }, answer.delayMs ?? 0);
    });
    await new Promise<void>((resolve) => this.#server?.listen(0, '127.0.0.1', resolve));
    return `http://127.0.0.1:${(this.#server.address() as AddressInfo).port}`;
  }

  async stop(): Promise<void> {
    this.#server?.closeAllConnections();
    await new Promise<void>((resolve) => this.#server?.close(() => resolve()));
  }

  /**
   * For the enclosing suite: started before it, stopped after it, its answers and requests cleared
   * before each test. Returns the peer's base URL once started.
   */
  forSuite(): () => string {
    let url = '';
    before(async () => {
      url = await this.start();
    });
    after(() => this.stop());
    beforeEach(() => {
      this.answers.clear();
      this.requests.length = 0;
    });
    return () => url;
  }
}
