import type { ServerResponse } from 'node:http';
import type { Router } from './router.ts';
import { HttpError } from './respond.ts';
import { LIVE_DATA_SCRIPT, assetOf, readAsset } from '../../visualize/assets.ts';

function send(res: ServerResponse, contentType: string, body: Buffer | string): void {
  res.writeHead(200, {
    'content-type': contentType,
    'content-length': Buffer.byteLength(body),
    'cache-control': 'no-cache',
    'x-content-type-options': 'nosniff',
  });
  res.end(body);
}

/**
 * `GET /visualize` (the page, redirected to `/visualize/` so its relative asset paths resolve) and
 * its fixed set of assets. The page needs no token; the API calls it makes do.
 */
export function registerVisualizerRoutes(router: Router): void {
  router
    .on('GET', '/visualize', async ({ res, url }) => {
      if (!url.pathname.endsWith('/')) {
        res.writeHead(302, { location: `/visualize/${url.search}`, 'content-length': 0 });
        res.end();
        return;
      }
      send(res, 'text/html; charset=utf-8', (await readAsset('index.html')) ?? '');
    })
    .on('GET', '/visualize/:file', async ({ res, params }) => {
      const name = params['file'] ?? '';
      if (name === 'data.js') return send(res, 'text/javascript; charset=utf-8', LIVE_DATA_SCRIPT);
      const asset = assetOf(name);
      const body = await readAsset(name);
      if (!asset || !body) throw new HttpError(404, 'not found', `no visualizer file ${name}`);
      send(res, asset.contentType, body);
    });
}
