import assert from 'node:assert/strict';
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';
import { SNAPSHOT_VERSION } from '../../../actors/runs/supervisor.ts';
import { runStatusOfTags } from '../../../machines/status.ts';
import type { SnapshotFixture } from '../../fixtures/snapshots/make-fixtures.ts';
import { makeFixture } from '../../fixtures/snapshots/make-fixtures.ts';
import { SCENARIOS } from '../../fixtures/snapshots/scenarios.ts';
import { RunHarness } from '../../support/machines.ts';

const ROOT = fileURLToPath(new URL('../../fixtures/snapshots/', import.meta.url));

/** Every stored fixture, of every release that stored some (`v<SNAPSHOT_VERSION>/`). */
async function storedFixtures(): Promise<{ path: string; fixture: SnapshotFixture }[]> {
  const found: { path: string; fixture: SnapshotFixture }[] = [];
  for (const dir of (await readdir(ROOT, { withFileTypes: true })).filter((entry) => entry.isDirectory() && /^v\d+$/.test(entry.name))) {
    for (const file of (await readdir(join(ROOT, dir.name))).filter((name) => name.endsWith('.json')).sort()) {
      const path = join(dir.name, file);
      found.push({ path, fixture: JSON.parse(await readFile(join(ROOT, path), 'utf8')) as SnapshotFixture });
    }
  }
  return found;
}

const fixtures = await storedFixtures();

describe('stored snapshots of earlier releases restore and finish on the current charts (issue "Runs for months")', () => {
  it('fixtures of this release exist for every waiting state the scenarios stop in', () => {
    const mine = fixtures.filter(({ fixture }) => fixture.snapshotVersion === SNAPSHOT_VERSION).map(({ fixture }) => fixture.scenario);
    assert.deepEqual(mine.sort(), SCENARIOS.map((s) => s.name).sort(), `run: node --import tsx test/fixtures/snapshots/make-fixtures.ts (snapshot version ${SNAPSHOT_VERSION})`);
  });

  for (const { path, fixture } of fixtures) {
    it(`${path}: restores in the state it was stored in and finishes green with the same events`, () => {
      assert.equal(
        fixture.snapshotVersion,
        SNAPSHOT_VERSION,
        `a snapshot of version ${fixture.snapshotVersion} is refused by this build (${SNAPSHOT_VERSION}): the chart changed its stored format. ` +
          'Migrate such snapshots on restore (and test it here), or keep the version and let old states resolve into the new chart',
      );
      const restored = new RunHarness(fixture.input, fixture.persisted);
      assert.deepEqual(restored.jobStates(), fixture.jobStates);
      for (const event of fixture.finish) restored.send(event);
      assert.equal(runStatusOfTags(restored.snapshot.tags), 'success');
      assert.deepEqual(Object.values(restored.jobStates()), Object.keys(fixture.jobStates).map(() => 'success'));
    });
  }

  it('the stored fixtures of this release are what this release writes today (a change of the stored format shows here first)', () => {
    for (const { fixture } of fixtures.filter(({ fixture: f }) => f.snapshotVersion === SNAPSHOT_VERSION)) {
      const scenario = SCENARIOS.find((s) => s.name === fixture.scenario);
      assert.ok(scenario, `no scenario ${fixture.scenario}`);
      const today = makeFixture(scenario);
      assert.deepEqual(Object.keys(today.persisted as object).sort(), Object.keys(fixture.persisted as object).sort());
      assert.deepEqual(today.jobStates, fixture.jobStates, fixture.scenario);
    }
  });
});
