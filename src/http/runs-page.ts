import type { Router } from './router.ts';
import { HttpError, sendAsset } from './respond.ts';
import { readRunsAsset, runsAssetOf } from '../../visualize/runs-assets.ts';

/**
 * `GET /runs` (the runs page, redirected to `/runs/` so its relative asset paths resolve) and its
 * fixed set of assets. The page needs no token; the API calls it makes do.
 */
export function registerRunsPageRoutes(router: Router): void {
  router
    .on('GET', '/runs', async ({ res, url }) => {
      if (!url.pathname.endsWith('/')) {
        res.writeHead(302, { location: `/runs/${url.search}`, 'content-length': 0 });
        res.end();
        return;
      }
      const page = await readRunsAsset('index.html');
      if (!page) throw new HttpError(500, 'internal error', 'the runs page is missing from the asset list');
      sendAsset(res, 'text/html; charset=utf-8', page);
    })
    .on('GET', '/runs/:file', async ({ res, params }) => {
      const name = params['file'] ?? '';
      const asset = runsAssetOf(name);
      const body = await readRunsAsset(name);
      if (!asset || !body) throw new HttpError(404, 'not found', `no runs page file ${name}`);
      sendAsset(res, asset.contentType, body);
    });
}
