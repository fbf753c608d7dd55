import { existsSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';
import type { BrowserContext } from 'playwright-core';
import { tempDir } from '../../support/database.ts';

export const CHROMIUM = '/usr/bin/chromium';
export const INSTALL_HINT = 'apt-get update && apt-get install -y chromium';
export const ARTIFACTS = fileURLToPath(new URL('../../../test-artifacts/visualize/', import.meta.url));

/**
 * Why the browser suite is skipped, or undefined to run it. Without Debian's chromium it skips
 * locally but throws under CI=true, so the file fails instead of passing vacuously.
 */
export function browserSkipReason(): string | undefined {
  if (existsSync(CHROMIUM)) return undefined;
  const reason = `no Chromium at ${CHROMIUM}; install it with: ${INSTALL_HINT}`;
  if (process.env.CI === 'true') throw new Error(`${reason} (CI=true: failing instead of skipping)`);
  return reason;
}

/** Debian's headless Chromium with a fresh profile, no network services of its own. */
export async function launchBrowser(): Promise<BrowserContext> {
  await mkdir(ARTIFACTS, { recursive: true });
  return chromium.launchPersistentContext(await tempDir('sy-chromium-'), {
    executablePath: CHROMIUM,
    headless: true,
    viewport: { width: 1400, height: 1000 },
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
}
