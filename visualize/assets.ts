import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

/** A page's file: where it lives and how it is served. */
export interface Asset {
  path: string;
  contentType: string;
}

/** One page's fixed set of files: nothing outside it is ever read. */
export interface PageAssets {
  readonly files: Readonly<Record<string, Asset>>;
  assetOf(name: string): Asset | null;
  read(name: string): Promise<Buffer | null>;
}

const PUBLIC = fileURLToPath(new URL('./public/', import.meta.url));
const require = createRequire(import.meta.url);

const HTML = 'text/html; charset=utf-8';
const CSS = 'text/css; charset=utf-8';
export const JS = 'text/javascript; charset=utf-8';

/** What both pages load first: the admin token, API calls and the DOM builder (visualize/public/common.js). */
const COMMON: Asset = { path: `${PUBLIC}common.js`, contentType: JS };

function pageAssets(dir: string, names: readonly string[], extra: Record<string, Asset> = {}): PageAssets {
  const files: Record<string, Asset> = { 'common.js': COMMON, ...extra };
  for (const name of names) files[name] = { path: `${dir}${name}`, contentType: name.endsWith('.html') ? HTML : name.endsWith('.css') ? CSS : JS };
  const assetOf = (name: string) => (Object.hasOwn(files, name) ? (files[name] ?? null) : null);
  return {
    files,
    assetOf,
    read: async (name) => {
      const asset = assetOf(name);
      return asset ? readFile(asset.path) : null;
    },
  };
}

/** ELK, which lays out the visualizer's charts and the runs page's needs graph (elkjs's documented browser bundle). */
const ELK_BUNDLE: Asset = { path: require.resolve('elkjs/lib/elk.bundled.js'), contentType: JS };

/** The visualizer (`/visualize/`); `data.js` is written per use. */
export const VISUALIZER = pageAssets(PUBLIC, ['index.html', 'style.css', 'chart.js', 'source.js', 'view.js', 'app.js'], { 'elk.bundled.js': ELK_BUNDLE });

/** The runs page (`/runs/`). */
export const RUNS_PAGE = pageAssets(`${PUBLIC}runs/`, ['index.html', 'style.css', 'api.js', 'dom.js', 'list.js', 'graph.js', 'run.js', 'logs.js', 'app.js'], { 'elk.bundled.js': ELK_BUNDLE });

/** The data script of the served visualizer: no embedded data, so the page asks the API. */
export const LIVE_DATA_SCRIPT = 'window.SWITCHYARD_OFFLINE = null;\n';

/** The data script of an offline copy: everything the page shows, embedded (file:// cannot fetch). */
export function offlineDataScript(data: unknown): string {
  return `window.SWITCHYARD_OFFLINE = ${JSON.stringify(data)};\n`;
}
