import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import type { Server } from 'node:http';
import { after, before, describe, it } from 'node:test';
import { Router } from '../../../src/http/router.ts';
import { registerRunsPageRoutes } from '../../../src/http/pages.ts';
import { createHttpServer, listen } from '../../../src/http/server.ts';
import { RUNS_PAGE } from '../../../visualize/assets.ts';
import { testLog } from '../../support/database.ts';

describe('GET /runs: the runs page and its fixed assets', () => {
  let server: Server;
  let base = '';

  before(async () => {
    const router = new Router();
    registerRunsPageRoutes(router);
    server = createHttpServer({ router, adminTokenHash: createHash('sha256').update('unused').digest(), log: testLog });
    base = `http://127.0.0.1:${await listen(server, 0, '127.0.0.1')}`;
  });

  after(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  it('redirects /runs to /runs/ keeping the query, and serves the page there without a token', async () => {
    const redirect = await fetch(`${base}/runs?token=abc`, { redirect: 'manual' });
    assert.equal(redirect.status, 302);
    assert.equal(redirect.headers.get('location'), '/runs/?token=abc');
    const page = await fetch(`${base}/runs/`);
    assert.equal(page.status, 200);
    assert.equal(page.headers.get('content-type'), 'text/html; charset=utf-8');
    const html = await page.text();
    for (const name of Object.keys(RUNS_PAGE.files).filter((file) => file.endsWith('.js'))) assert.match(html, new RegExp(`<script src="${name}"></script>`), name);
    assert.match(html, /<link rel="stylesheet" href="style.css">/);
  });

  it('serves every listed asset with its content type, and nothing else', async () => {
    const expected: Record<string, string> = { html: 'text/html; charset=utf-8', css: 'text/css; charset=utf-8', js: 'text/javascript; charset=utf-8' };
    for (const name of Object.keys(RUNS_PAGE.files)) {
      const answer = await fetch(`${base}/runs/${name}`);
      assert.equal(answer.status, 200, name);
      assert.equal(answer.headers.get('content-type'), expected[name.split('.').pop() ?? ''], name);
      assert.equal(answer.headers.get('x-content-type-options'), 'nosniff');
      assert.ok((await answer.text()).length > 100, `${name} has content`);
    }
    for (const unknown of ['nope.js', '__proto__', 'constructor', '..%2Fassets.ts', '..%2F..%2Fpackage.json', 'app.js.map']) {
      const answer = await fetch(`${base}/runs/${unknown}`);
      assert.equal(answer.status, 404, unknown);
      assert.equal(((await answer.json()) as { error: string }).error, 'not found');
    }
    assert.equal((await fetch(`${base}/runs/a/b`)).status, 404);
    assert.equal((await fetch(`${base}/runs/app.js`, { method: 'POST' })).status, 405);
  });
});
