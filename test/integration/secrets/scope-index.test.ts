import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { it } from 'node:test';
import { sql } from 'kysely';
import { PLACEMENT_CHANNEL, listenForPeers } from '../../../src/db/peer-bus.ts';
import { SecretService } from '../../../src/secrets/service.ts';
import { describeEachKind, testLog, withTestDatabase } from '../../support/database.ts';
import { eventually } from '../../support/runtime.ts';

const now = () => Date.now();

await describeEachKind('which scopes hold secrets, kept by each coordinator', (kind) => {
  it('a scope is read again after a write here, and after a peer’s write once its signal arrives', async () => {
    await withTestDatabase(kind, async ({ db, connection }) => {
      const keys = { current: randomBytes(32), old: null };
      const here = new SecretService({ db, keys, now });
      const peer = new SecretService({ db, keys, now });
      assert.deepEqual(await here.scopes.holding(['global', 'repo:acme/app']), [], 'no secrets: nothing to read');

      await here.put('repo:acme/app', 'TOKEN', 'v', 'test');
      assert.deepEqual(await here.scopes.holding(['global', 'repo:acme/app']), ['repo:acme/app'], 'its own write is seen at once');

      const signals: string[] = [];
      const listener = listenForPeers(connection, [PLACEMENT_CHANNEL], (payload) => {
        signals.push(payload);
        if (payload === 'secrets') here.scopes.invalidate();
      }, testLog);
      try {
        // Its LISTEN is in place before the peer writes (a fixed 200 ms wait missed it once on a loaded CI machine).
        const listening = sql<{ n: number }>`SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND state = 'idle' AND query LIKE 'LISTEN %'`;
        await eventually(async () => ((await listening.execute(db)).rows[0]?.n ?? 0) > 0, 5_000, 'the listener to listen');
        await peer.put('global', 'API_KEY', 'v', 'test');
        await eventually(() => signals.includes('secrets'), 5_000, 'the peer’s signal');
        assert.deepEqual(await here.scopes.holding(['global', 'repo:acme/app']), ['global', 'repo:acme/app']);
        signals.length = 0;
        await peer.delete('global', 'API_KEY', 'test');
        await eventually(() => signals.includes('secrets'), 5_000, 'the signal of the deletion');
        assert.deepEqual(await here.scopes.holding(['global', 'repo:acme/app']), ['repo:acme/app']);
      } finally {
        await listener.close();
      }
    });
  });

});
