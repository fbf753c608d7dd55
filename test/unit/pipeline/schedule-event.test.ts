import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { LockWorkflow } from '../../../machines/lock.types.ts';
import { isDropped } from '../../../src/pipeline/normalized-event.ts';
import { firesInMinute, normalizeScheduleEvent, scheduleProblem, schedulesOf } from '../../../src/pipeline/schedule-event.ts';
import { matches } from './trigger-helpers.ts';

const at = (iso: string) => Date.parse(iso);

describe('schedules (docs/lockfile.md#schedules)', () => {
  it('fire in the minutes their expression names, in their own time zone', () => {
    const nightly = { cronExpression: '0 3 * * *', timezone: 'UTC' };
    assert.equal(firesInMinute(nightly, at('2026-12-05T03:00:00Z')), true);
    assert.equal(firesInMinute(nightly, at('2026-12-05T03:01:00Z')), false);
    assert.equal(firesInMinute(nightly, at('2026-12-05T02:59:00Z')), false);
    const newYork = { cronExpression: '0 3 * * *', timezone: 'America/New_York' };
    assert.equal(firesInMinute(newYork, at('2026-12-05T08:00:00Z')), true, '03:00 EST is 08:00 UTC in December');
    assert.equal(firesInMinute(newYork, at('2026-07-05T07:00:00Z')), true, 'and 07:00 UTC in July (EDT)');
    const quarter = { cronExpression: '*/15 * * * *', timezone: 'UTC' };
    const fired = Array.from({ length: 60 }, (_, minute) => minute).filter((minute) => firesInMinute(quarter, at('2026-12-05T10:00:00Z') + minute * 60_000));
    assert.deepEqual(fired, [0, 15, 30, 45]);
    assert.equal(firesInMinute({ cronExpression: '30 * * * * *', timezone: 'UTC' }, at('2026-12-05T10:07:00Z')), true, 'six fields: seconds first');
    assert.equal(firesInMinute({ cronExpression: '@daily', timezone: 'UTC' }, at('2026-12-05T00:00:00Z')), true);
  });

  it('say why an expression or a zone can never fire', () => {
    assert.equal(scheduleProblem({ cronExpression: '0 3 * * *', timezone: 'Europe/Paris' }), null);
    assert.match(scheduleProblem({ cronExpression: '0 3 * *', timezone: 'UTC' }) ?? '', /has 4 fields; it needs 5/);
    assert.match(scheduleProblem({ cronExpression: '61 * * * *', timezone: 'UTC' }) ?? '', /61/);
    assert.match(scheduleProblem({ cronExpression: '0 3 * * *', timezone: 'Mars/Olympus' }) ?? '', /"Mars\/Olympus" is not an IANA time zone/);
    assert.match(scheduleProblem({ cronExpression: 'every day', timezone: 'UTC' }) ?? '', /has 2 fields/);
  });

  it('are listed once per expression and zone, whatever the workflows', () => {
    const workflow = (name: string, cronExpression: string, timezone = 'UTC'): LockWorkflow => ({ name, jobs: [], triggers: [{ _type: 'schedule', cronExpression, timezone }, null, { _type: 'push', branches: [], paths: [] }] });
    assert.deepEqual(schedulesOf([workflow('a', '0 3 * * *'), workflow('b', '0 3 * * *'), workflow('c', '0 3 * * *', 'Asia/Tokyo')]), [
      { cronExpression: '0 3 * * *', timezone: 'UTC' },
      { cronExpression: '0 3 * * *', timezone: 'Asia/Tokyo' },
    ]);
  });

  it('become schedule events read at the default branch head, matched by expression and zone', () => {
    const body = { repository: 'acme/app', branch: 'trunk', cronExpression: '0 3 * * *', timezone: 'UTC', scheduledAt: '2026-12-05T03:00:00.000Z' };
    const event = normalizeScheduleEvent(body);
    assert.ok(!isDropped(event));
    assert.deepEqual({ sha: event.sha, ref: event.ref, repository: event.repository }, { sha: null, ref: 'refs/heads/trunk', repository: 'acme/app' });
    assert.deepEqual(event.envelope, { type: 'schedule', targetBranch: 'trunk', payload: { cronExpression: '0 3 * * *', timezone: 'UTC', scheduledAt: body.scheduledAt }, sourceRepo: 'acme/app' });
    assert.equal(matches({ _type: 'schedule', cronExpression: '0 3 * * *', timezone: 'UTC' }, event.envelope), true);
    assert.equal(matches({ _type: 'schedule', cronExpression: '0 3 * * *', timezone: 'Asia/Tokyo' }, event.envelope), false, 'the same expression in another zone fires at another time');
    const malformed = normalizeScheduleEvent({ ...body, cronExpression: 7 });
    assert.ok(isDropped(malformed) && malformed.dropped.startsWith('malformed schedule delivery'));
  });
});
