import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { LockFileCache } from '../../../src/lockfile/cache.ts';
import { LockFileParseError } from '../../../src/lockfile/errors.ts';
import { parseLockFile } from '../../../src/lockfile/parse.ts';
import { resolveLockFile } from '../../../src/lockfile/resolve.ts';
import type { LockCandidate } from '../../../src/lockfile/resolve.ts';
import type { DefaultBranchHead, LockFetchOutcome, LockFileProvider } from '../../../src/lockfile/providers/types.ts';
import { exampleWith, specExampleText } from './helpers.ts';

const SHA = '0d1a26e67d8f5eaf1f6ba5c57fc3c7d91ac0fd1c';
const HEAD = 'eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee';

function lockOf(text: string) {
  const parsed = parseLockFile(text);
  assert.ok(parsed.ok);
  return parsed.lock;
}

const OUTCOMES = {
  found: { kind: 'found', lock: lockOf(specExampleText()), bytes: 10 },
  miss: { kind: 'miss', detail: 'no .kici/kici.lock.json' },
  corrupt: {
    kind: 'corrupt',
    error: new LockFileParseError('$.schemaVersion', 'schemaVersion 28 is not supported', 'schema_version'),
  },
  transient: { kind: 'transient', detail: 'HTTP 503' },
  absent: { kind: 'absent', detail: 'commit not present' },
  invalid: { kind: 'invalid', detail: 'not a commit id' },
} satisfies Record<string, LockFetchOutcome>;
type Kind = keyof typeof OUTCOMES;

/** A provider with fixed answers: an in-memory implementation of the port, recording what it was asked. */
function scripted(name: string, outcome: LockFetchOutcome, head: DefaultBranchHead = { sha: HEAD, branch: 'main' }) {
  const asked: (string | null)[] = [];
  const provider: LockFileProvider = {
    name,
    fetch: ({ sha }) => {
      asked.push(sha);
      return Promise.resolve(outcome);
    },
    defaultBranchHead: () => Promise.resolve(head),
  };
  return { provider, asked };
}

function candidates(...kinds: Kind[]): { list: LockCandidate[]; asked: (string | null)[][] } {
  const made = kinds.map((kind, index) => scripted(`github:acme/app-${index}`, OUTCOMES[kind]));
  return {
    list: made.map(({ provider }, index) => ({ provider, cloneUrl: `https://example.test/${index}.git` })),
    asked: made.map(({ asked }) => asked),
  };
}

describe('resolveLockFile: the LOCK-3 fallback matrix', () => {
  const matrix: [Kind[], string][] = [
    [['found'], 'found@0'],
    [['miss'], 'miss'],
    [['corrupt'], 'corrupt'],
    [['transient'], 'transient'],
    [['found', 'corrupt'], 'found@0'],
    [['miss', 'found'], 'found@1'],
    [['corrupt', 'found'], 'found@1'],
    [['transient', 'found'], 'found@1'],
    [['corrupt', 'miss'], 'corrupt'],
    [['miss', 'corrupt'], 'corrupt'],
    [['miss', 'transient'], 'transient'],
    [['transient', 'miss'], 'transient'],
    [['corrupt', 'transient'], 'transient'],
    [['transient', 'corrupt'], 'transient'],
    [['miss', 'miss'], 'miss'],
    [['corrupt', 'corrupt', 'found'], 'found@2'],
    [[], 'miss'],
    // A push race (absent) is retried briefly; a read that can never succeed (invalid) not at all.
    [['absent'], 'absent'],
    [['invalid'], 'invalid'],
    [['absent', 'found'], 'found@1'],
    [['absent', 'transient'], 'transient'],
    [['invalid', 'absent'], 'absent'],
    [['corrupt', 'absent'], 'absent'],
    [['invalid', 'corrupt'], 'invalid'],
    [['miss', 'invalid'], 'invalid'],
  ];
  for (const [kinds, expected] of matrix) {
    it(`${kinds.join(' → ') || 'no candidates'} resolves to ${expected}`, async () => {
      const { list } = candidates(...kinds);
      const result = await resolveLockFile({ candidates: list, sha: SHA, cache: new LockFileCache() });
      const summary = result.kind === 'found' ? `found@${result.provider.slice('github:acme/app-'.length)}` : result.kind;
      assert.equal(summary, expected);
    });
  }

  it('stops at the first valid lock file and returns its source, clone URL and commit', async () => {
    const { list, asked } = candidates('corrupt', 'found', 'found');
    const result = await resolveLockFile({ candidates: list, sha: SHA, cache: new LockFileCache() });
    assert.deepEqual(result, {
      kind: 'found',
      lock: OUTCOMES.found.lock,
      provider: 'github:acme/app-1',
      cloneUrl: 'https://example.test/1.git',
      sha: SHA,
    });
    assert.deepEqual(asked, [[SHA], [SHA], []]);
  });

  it('reports the first parse error seen', async () => {
    const second = new LockFileParseError('$', 'lock file is empty', 'file');
    const list = [OUTCOMES.corrupt, { kind: 'corrupt', error: second } as const].map((outcome, index) => ({
      provider: scripted(`local:acme/app-${index}`, outcome).provider,
      cloneUrl: null,
    }));
    const result = await resolveLockFile({ candidates: list, sha: SHA, cache: new LockFileCache() });
    assert.ok(result.kind === 'corrupt');
    assert.equal(result.error, OUTCOMES.corrupt.error);
  });

  it('names every source that could not answer in a transient result', async () => {
    const { list } = candidates('transient', 'miss', 'transient');
    const result = await resolveLockFile({ candidates: list, sha: SHA, cache: new LockFileCache() });
    assert.deepEqual(result, {
      kind: 'transient',
      detail: 'github:acme/app-0: HTTP 503; github:acme/app-2: HTTP 503',
    });
  });
});

describe('resolveLockFile: default branch head and cache', () => {
  it('reads each candidate at its default branch head when the event has no commit', async () => {
    const { provider, asked } = scripted('local:acme/app', OUTCOMES.found);
    const result = await resolveLockFile({ candidates: [{ provider, cloneUrl: null }], sha: null, cache: new LockFileCache() });
    assert.ok(result.kind === 'found');
    assert.equal(result.sha, HEAD);
    assert.deepEqual(asked, [HEAD]);
  });

  it('treats an unreadable default branch head as transient, never as a miss', async () => {
    const { provider, asked } = scripted('github:acme/app', OUTCOMES.found, { transient: 'HTTP 502 on /repos/acme/app' });
    const result = await resolveLockFile({ candidates: [{ provider, cloneUrl: null }], sha: null, cache: new LockFileCache() });
    assert.deepEqual(result, { kind: 'transient', detail: 'github:acme/app: HTTP 502 on /repos/acme/app' });
    assert.deepEqual(asked, []);
  });

  it('treats a provider that throws as transient', async () => {
    const provider: LockFileProvider = {
      name: 'github:acme/app',
      fetch: () => Promise.reject(new Error('socket hang up')),
      defaultBranchHead: () => Promise.resolve({ sha: HEAD, branch: 'main' }),
    };
    const result = await resolveLockFile({ candidates: [{ provider, cloneUrl: null }], sha: SHA, cache: new LockFileCache() });
    assert.deepEqual(result, { kind: 'transient', detail: 'github:acme/app: provider threw: socket hang up' });
  });

  it('answers a second resolution of the same commit from the cache, and never caches a corrupt inbound file', async () => {
    const cache = new LockFileCache();
    const { list, asked } = candidates('corrupt', 'found');
    await resolveLockFile({ candidates: list, sha: SHA, cache });
    const again = await resolveLockFile({ candidates: list, sha: SHA, cache });
    assert.ok(again.kind === 'found');
    assert.equal(again.provider, 'github:acme/app-1');
    assert.deepEqual(asked, [[SHA, SHA], [SHA]], 'the corrupt source is asked again; the valid one is cached');
    assert.deepEqual({ hits: cache.hits, size: cache.size }, { hits: 1, size: 1 });
  });

  it('keys the cache by provider, so another source of the same commit is fetched on its own', async () => {
    const cache = new LockFileCache();
    const other = lockOf(JSON.stringify(exampleWith([['workflows', 0, 'name'], 'other'])));
    const a = scripted('github:acme/app', OUTCOMES.found);
    const b = scripted('local:acme/app', { kind: 'found', lock: other, bytes: 5 });
    await resolveLockFile({ candidates: [{ provider: a.provider, cloneUrl: null }], sha: SHA, cache });
    const result = await resolveLockFile({ candidates: [{ provider: b.provider, cloneUrl: null }], sha: SHA, cache });
    assert.ok(result.kind === 'found');
    assert.equal(result.lock, other);
  });
});
