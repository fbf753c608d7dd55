import type { Router } from './router.ts';
import { HttpError, sendAsset } from './respond.ts';
import { LIVE_DATA_SCRIPT, assetOf, readAsset } from '../../visualize/assets.ts';

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
      sendAsset(res, 'text/html; charset=utf-8', (await readAsset('index.html')) ?? '');
    })
    .on('GET', '/visualize/:file', async ({ res, params }) => {
      const name = params['file'] ?? '';
      if (name === 'data.js') return sendAsset(res, 'text/javascript; charset=utf-8', LIVE_DATA_SCRIPT);
      const asset = assetOf(name);
      const body = await readAsset(name);
      if (!asset || !body) throw new HttpError(404, 'not found', `no visualizer file ${name}`);
      sendAsset(res, asset.contentType, body);
    });
}
