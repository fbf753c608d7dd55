import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import type { Asset } from './assets.ts';

const RUNS = fileURLToPath(new URL('./public/runs/', import.meta.url));

const JS = 'text/javascript; charset=utf-8';

/** The runs page's files, served under `/runs/`; nothing outside this list is ever read. */
export const RUNS_ASSETS: Record<string, Asset> = {
  'index.html': { path: `${RUNS}index.html`, contentType: 'text/html; charset=utf-8' },
  'style.css': { path: `${RUNS}style.css`, contentType: 'text/css; charset=utf-8' },
  'api.js': { path: `${RUNS}api.js`, contentType: JS },
  'dom.js': { path: `${RUNS}dom.js`, contentType: JS },
  'list.js': { path: `${RUNS}list.js`, contentType: JS },
  'run.js': { path: `${RUNS}run.js`, contentType: JS },
  'logs.js': { path: `${RUNS}logs.js`, contentType: JS },
  'app.js': { path: `${RUNS}app.js`, contentType: JS },
};

export function runsAssetOf(name: string): Asset | null {
  return Object.hasOwn(RUNS_ASSETS, name) ? (RUNS_ASSETS[name] ?? null) : null;
}

export async function readRunsAsset(name: string): Promise<Buffer | null> {
  const asset = runsAssetOf(name);
  return asset ? readFile(asset.path) : null;
}
