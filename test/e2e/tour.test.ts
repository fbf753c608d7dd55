import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { describe, it } from 'node:test';
import { makeTour, TOUR_SHOTS } from '../../docs/tour/make-tour.ts';
import { tempDir } from '../support/database.ts';
import { browserSkipReason } from './visualize/browser.ts';

const PNG = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

describe('docs/tour.md: its screenshots, made by its script', { skip: browserSkipReason() }, () => {
  it('npm run tour starts Switchyard, makes three runs and writes the three pictures; the pages log no error', async () => {
    const out = await tempDir('sy-tour-out-');
    const { files, pageErrors } = await makeTour(out);
    assert.deepEqual(pageErrors, [], 'no script or console error on any page');
    assert.equal(files.length, TOUR_SHOTS.length);
    for (const file of files) {
      const bytes = await readFile(file);
      assert.ok(bytes.subarray(0, 8).equals(PNG) && bytes.length > 10_000, `${file} is a picture`);
    }
    const tour = await readFile(new URL('../../docs/tour.md', import.meta.url), 'utf8');
    for (const name of TOUR_SHOTS) assert.match(tour, new RegExp(`\\(tour/${name.replace('.', '\\.')}\\)`), `docs/tour.md shows ${name}`);
  });
});
