import type { Router } from './router.ts';
import { HttpError, sendAsset } from './respond.ts';
import { JS, LIVE_DATA_SCRIPT, RUNS_PAGE, VISUALIZER, type PageAssets } from '../../visualize/assets.ts';

/**
 * `GET <mount>` (the page, redirected to `<mount>/` so its relative asset paths resolve) and its fixed
 * set of files. The page needs no token; the API calls it makes do. `generated` answers files made
 * per request (the visualizer's `data.js`).
 */
function registerPage(router: Router, mount: string, what: string, assets: PageAssets, generated: Record<string, string> = {}): void {
  router
    .on('GET', mount, async ({ res, url }) => {
      if (!url.pathname.endsWith('/')) {
        res.writeHead(302, { location: `${mount}/${url.search}`, 'content-length': 0 });
        res.end();
        return;
      }
      const page = await assets.read('index.html');
      if (!page) throw new HttpError(500, 'internal error', `the ${what} is missing from its asset list`);
      sendAsset(res, 'text/html; charset=utf-8', page);
    })
    .on('GET', `${mount}/:file`, async ({ res, params }) => {
      const name = params['file'] ?? '';
      if (Object.hasOwn(generated, name)) return sendAsset(res, JS, generated[name] ?? '');
      const asset = assets.assetOf(name);
      const body = await assets.read(name);
      if (!asset || !body) throw new HttpError(404, 'not found', `no ${what} file ${name}`);
      sendAsset(res, asset.contentType, body);
    });
}

/** The statechart visualizer at `/visualize/`. */
export function registerVisualizerRoutes(router: Router): void {
  registerPage(router, '/visualize', 'visualizer', VISUALIZER, { 'data.js': LIVE_DATA_SCRIPT });
}

/** The runs page at `/runs/`. */
export function registerRunsPageRoutes(router: Router): void {
  registerPage(router, '/runs', 'runs page', RUNS_PAGE);
}
