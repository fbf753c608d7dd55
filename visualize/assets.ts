import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

/** The page's files: name → where it lives and how it is served. `data.js` is written per use. */
export interface Asset {
  path: string;
  contentType: string;
}

const PUBLIC = fileURLToPath(new URL('./public/', import.meta.url));
const require = createRequire(import.meta.url);

const JS = 'text/javascript; charset=utf-8';

export const ASSETS: Record<string, Asset> = {
  'index.html': { path: `${PUBLIC}index.html`, contentType: 'text/html; charset=utf-8' },
  'style.css': { path: `${PUBLIC}style.css`, contentType: 'text/css; charset=utf-8' },
  'chart.js': { path: `${PUBLIC}chart.js`, contentType: JS },
  'source.js': { path: `${PUBLIC}source.js`, contentType: JS },
  'view.js': { path: `${PUBLIC}view.js`, contentType: JS },
  'app.js': { path: `${PUBLIC}app.js`, contentType: JS },
  'elk.bundled.js': { path: require.resolve('elkjs/lib/elk.bundled.js'), contentType: JS },
};

/** The data script of the served page: no embedded data, so the page asks the API. */
export const LIVE_DATA_SCRIPT = 'window.SWITCHYARD_OFFLINE = null;\n';

/** The data script of an offline copy: everything the page shows, embedded (file:// cannot fetch). */
export function offlineDataScript(data: unknown): string {
  return `window.SWITCHYARD_OFFLINE = ${JSON.stringify(data)};\n`;
}

export function assetOf(name: string): Asset | null {
  return Object.hasOwn(ASSETS, name) ? (ASSETS[name] ?? null) : null;
}

export async function readAsset(name: string): Promise<Buffer | null> {
  const asset = assetOf(name);
  return asset ? readFile(asset.path) : null;
}
