import assert from 'node:assert/strict';
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';
import { SNAPSHOT_VERSION, migrateSnapshot } from '../../../actors/runs/snapshot-migration.ts';
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
      // What the supervisor restores: an earlier release's snapshot brought to this release's format.
      const persisted = migrateSnapshot(fixture.snapshotVersion, fixture.persisted);
      assert.notEqual(
        persisted,
        null,
        `a snapshot of version ${fixture.snapshotVersion} is refused by this build (${SNAPSHOT_VERSION}): the chart changed its stored format. ` +
          'Add a step from it in actors/runs/snapshot-migration.ts (tested here), or keep the version and let old states resolve into the new chart',
      );
      const restored = new RunHarness(fixture.input, persisted);
      assert.deepEqual(restored.jobStates(), fixture.jobStates);
      for (const event of fixture.finish) restored.send(event);
      assert.equal(runStatusOfTags(restored.snapshot.tags), 'success');
      assert.deepEqual(Object.values(restored.jobStates()), Object.keys(fixture.jobStates).map(() => 'success'));
    });
  }

  it("an earlier release's snapshot, migrated, is what this release would store in the same state (same keys, in the same order)", () => {
    for (const { fixture } of fixtures.filter(({ fixture: f }) => f.snapshotVersion !== SNAPSHOT_VERSION)) {
      const scenario = SCENARIOS.find((s) => s.name === fixture.scenario);
      if (!scenario) continue;
      const today = makeFixture(scenario).persisted as { context: object; children: Record<string, { snapshot: { context: object } }> };
      const migrated = migrateSnapshot(fixture.snapshotVersion, fixture.persisted) as typeof today;
      // The context's keys and its spec's, in order: a restored context then has the layout of a new one.
      const shape = (context: object = {}) => [Object.keys(context), Object.keys((context as { spec?: object }).spec ?? {})];
      assert.deepEqual(shape(migrated.context), shape(today.context), `${fixture.scenario}: run context`);
      for (const [key, child] of Object.entries(today.children)) assert.deepEqual(shape(migrated.children[key]?.snapshot.context), shape(child.snapshot.context), `${fixture.scenario}: job ${key}`);
    }
  });

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
