import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { join, relative } from 'node:path';
import { describe, it } from 'node:test';
import { LONG_RUNNING, testFiles, TIERS } from '../../tiers.ts';

describe('test tiers (npm test)', () => {
  it('every test file under test/ belongs to exactly one tier, and each tier starts with its long-running files', async () => {
    const everyFile = (await readdir('test', { recursive: true })).filter((f) => f.endsWith('.test.ts')).map((f) => `test/${f}`);
    const byTier = await testFiles([]);
    const tiered = [...byTier.values()].flat().map((f) => relative(process.cwd(), f));
    assert.deepEqual([...tiered].sort(), everyFile.sort());
    for (const tier of TIERS) {
      const files = (byTier.get(tier.name) ?? []).map((f) => relative(process.cwd(), f));
      const long = LONG_RUNNING.filter((f) => files.includes(f));
      assert.deepEqual(files.slice(0, long.length), long, `${tier.name} starts with its long-running files`);
    }
  });

  it('names only files that exist as long-running', () => {
    assert.deepEqual(LONG_RUNNING.filter((f) => !existsSync(f)), []);
  });

  it('refuses a test file outside every tier, naming it', async () => {
    const dir = await mkdtemp('test-artifacts-stray-');
    try {
      await writeFile(join(dir, 'stray.test.ts'), '');
      await assert.rejects(testFiles([dir]), { message: `${dir}/stray.test.ts is in no test tier (test/unit, test/integration, test/e2e, test/chaos)` });
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
