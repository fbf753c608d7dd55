import { readdir, stat } from 'node:fs/promises';
import { join, relative, resolve } from 'node:path';

/** A group of test files run together, with the isolation and concurrency they bear. */
export interface Tier {
  readonly name: 'unit' | 'integration' | 'e2e';
  /** Folders (relative to the repository) whose `*.test.ts` files belong to this tier. */
  readonly roots: readonly string[];
  /** `none`: every file in one process. `process`: a process per file. */
  readonly isolation: 'none' | 'process';
  /** Files run at once (process isolation). */
  readonly concurrency: number;
}

/**
 * Pure unit tests share one process. Integration files wait on Postgres more than they compute,
 * so three run at once; end-to-end files each start coordinator processes, so two at a time on
 * this project's two-core machines.
 */
export const TIERS: readonly Tier[] = [
  { name: 'unit', roots: ['test/unit'], isolation: 'none', concurrency: 1 },
  { name: 'integration', roots: ['test/integration'], isolation: 'process', concurrency: 3 },
  { name: 'e2e', roots: ['test/e2e', 'test/chaos'], isolation: 'process', concurrency: 2 },
];

/**
 * Files that take about 15 s or more (`npm test` prints the slowest): started first, so a tier does
 * not end with one of them running alone.
 */
export const LONG_RUNNING: readonly string[] = [
  'test/chaos/chaos.test.ts',
  'test/e2e/failover.test.ts',
  'test/e2e/burst.test.ts',
  'test/e2e/restart.test.ts',
  'test/e2e/runs-page/runs-page.test.ts',
  'test/e2e/ctrl-c.test.ts',
  'test/e2e/dispatch/reconnect-and-cancel.test.ts',
  'test/integration/cli/runs-cli.test.ts',
  'test/integration/ws/conformance.test.ts',
  'test/integration/runtime/supervisor.test.ts',
  'test/integration/scaler/manager.test.ts',
  'test/integration/ws/handshake-timeouts.test.ts',
];

/**
 * The test files of each tier under `paths` (files or folders; every tier's roots when empty), the
 * long-running ones first.
 */
export async function testFiles(paths: readonly string[]): Promise<Map<Tier['name'], string[]>> {
  const wanted = paths.length === 0 ? TIERS.flatMap((t) => t.roots) : paths;
  const found = (await Promise.all(wanted.map((p) => collect(resolve(p))))).flat();
  const byTier = new Map<Tier['name'], string[]>();
  const rank = (file: string) => {
    const index = LONG_RUNNING.indexOf(relative(process.cwd(), file));
    return index === -1 ? LONG_RUNNING.length : index;
  };
  for (const file of [...new Set(found)].sort((a, b) => rank(a) - rank(b) || a.localeCompare(b))) {
    const path = relative(process.cwd(), file);
    const tier = TIERS.find((t) => t.roots.some((root) => path.startsWith(`${root}/`)));
    if (tier === undefined) throw new Error(`${path} is in no test tier (${TIERS.flatMap((t) => t.roots).join(', ')})`);
    byTier.set(tier.name, [...(byTier.get(tier.name) ?? []), file]);
  }
  return byTier;
}

async function collect(path: string): Promise<string[]> {
  const info = await stat(path);
  if (info.isFile()) return path.endsWith('.test.ts') ? [path] : [];
  const entries = await readdir(path, { withFileTypes: true });
  const nested = await Promise.all(entries.map((e) => collect(join(path, e.name))));
  return nested.flat();
}
