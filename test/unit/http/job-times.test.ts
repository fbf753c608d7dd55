import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { jobTimesOf, runDurationMs } from '../../../src/http/job-times.ts';

const NOW = 100_000;

describe('how long a job waited and ran (src/http/job-times.ts)', () => {
  it('a finished job: queued from creation to its dispatch, ran from running to its end', () => {
    const times = { pending: 1_000, queued: 1_010, dispatched: 1_250, running: 1_400, success: 2_650 };
    assert.deepEqual(jobTimesOf({ status: 'success', times }, NOW), { queuedMs: 250, runMs: 1_250 });
  });

  it('a job still waiting or still running counts up to now', () => {
    assert.deepEqual(jobTimesOf({ status: 'pending', times: { pending: 90_000 } }, NOW), { queuedMs: 10_000, runMs: null });
    assert.deepEqual(jobTimesOf({ status: 'running', times: { pending: 1_000, dispatched: 2_000, running: 3_000 } }, NOW), { queuedMs: 1_000, runMs: 97_000 });
  });

  it('a requeued job: its queued time runs to the last dispatch; a run of an earlier attempt is not this attempt’s', () => {
    const times = { pending: 1_000, dispatched: 9_000, running: 4_000, queued: 8_000 };
    assert.deepEqual(jobTimesOf({ status: 'queued', times }, NOW), { queuedMs: 8_000, runMs: null });
  });

  it('a job skipped before any dispatch has neither; a job written before times were kept has neither', () => {
    assert.deepEqual(jobTimesOf({ status: 'skipped', times: { pending: 1_000, skipped: 1_200 } }, NOW), { queuedMs: null, runMs: null });
    assert.deepEqual(jobTimesOf({ status: 'success', times: null }, NOW), { queuedMs: null, runMs: null });
  });

  it('a run lasts from its creation to its end, or to now', () => {
    assert.equal(runDurationMs({ created_at: 1_000, finished_at: 2_250 }, NOW), 1_250);
    assert.equal(runDurationMs({ created_at: '99000', finished_at: null }, NOW), 1_000);
    assert.equal(runDurationMs({ created_at: null, finished_at: null }, NOW), null);
  });
});
