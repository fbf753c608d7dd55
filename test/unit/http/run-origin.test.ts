import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { runOriginOf } from '../../../src/http/run-origin.ts';

const push = (payload: Record<string, unknown>) => ({ provider: 'github', event: { type: 'push', payload, targetBranch: 'main' } });

describe('where a run came from, for the runs list', () => {
  it("a push: its head commit's first message line and author (username, else name)", () => {
    const payload = { head_commit: { message: 'Fix the flaky test\n\nLong body', author: { name: 'Ada Lovelace', username: 'ada' } }, sender: { login: 'bot' } };
    assert.deepEqual(runOriginOf(push(payload)), { commit: { message: 'Fix the flaky test', author: 'ada' }, startedBy: null });
    assert.deepEqual(runOriginOf(push({ commits: [{ message: 'first' }, { message: 'second', author: { name: 'Grace' } }] })).commit, { message: 'second', author: 'Grace' });
  });

  it("a pull request: its title and author; a payload with no commit: its sender alone; no event: nothing", () => {
    assert.deepEqual(runOriginOf(push({ pull_request: { title: 'Add caches', user: { login: 'lin' } } })).commit, { message: 'Add caches', author: 'lin' });
    assert.deepEqual(runOriginOf(push({ commits: [], sender: { login: 'me' } })).commit, { message: null, author: 'me' });
    assert.deepEqual(runOriginOf({ provider: 'local', event: null }), { commit: null, startedBy: null });
    assert.deepEqual(runOriginOf(null), { commit: null, startedBy: null });
  });

  it('a run started by hand: who started it, an administrator when the request did not say', () => {
    assert.deepEqual(runOriginOf({ provider: 'api', event: null, startedBy: 'release-bot' }), { commit: null, startedBy: 'release-bot' });
    assert.deepEqual(runOriginOf({ provider: 'api', event: null }), { commit: null, startedBy: 'an administrator (API)' });
  });

  it('a long first line is cut, and values of the wrong type are ignored', () => {
    const long = 'x'.repeat(500);
    assert.equal(runOriginOf(push({ head_commit: { message: long } })).commit?.message?.length, 200);
    assert.deepEqual(runOriginOf(push({ head_commit: { message: 42, author: 'nobody' }, sender: { login: ['x'] } })).commit, { message: null, author: null });
  });
});
