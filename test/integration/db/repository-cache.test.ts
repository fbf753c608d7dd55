import assert from 'node:assert/strict';
import { it } from 'node:test';
import { sql } from 'kysely';
import { PLACEMENT_CHANNEL, listenForPeers } from '../../../src/db/peer-bus.ts';
import { RepositoryCache, UNREGISTERED_KEPT_MS, deleteRepository, upsertRepository } from '../../../src/db/repositories.ts';
import { describeEachKind, testLog, withTestDatabase } from '../../support/database.ts';
import { eventually } from '../../support/runtime.ts';

const app = { name: 'acme/app', provider: 'local' as const, path: '/srv/app', cloneUrl: null, defaultBranch: 'main', token: null };

await describeEachKind('registered repositories, kept by each coordinator', (kind) => {
  it('read once; a peer’s change is seen once its signal arrives; an unknown name is asked again after a while', async () => {
    await withTestDatabase(kind, async ({ db, connection }) => {
      let now = 0;
      const cache = new RepositoryCache(db, () => now);
      assert.equal(await cache.get('acme/app'), null);
      await upsertRepository(db, app, 1);
      assert.equal(await cache.get('acme/app'), null, 'a name found unregistered is answered from memory for a while');
      now += UNREGISTERED_KEPT_MS;
      assert.equal((await cache.get('acme/app'))?.path, '/srv/app', 'then read again');

      const signals: string[] = [];
      const listener = listenForPeers(connection, [PLACEMENT_CHANNEL], (payload) => {
        signals.push(payload);
        if (payload === 'repositories') cache.invalidate();
      }, testLog);
      try {
        // Its LISTEN is in place before anything changes (a fixed 200 ms wait can miss it on a loaded machine).
        const listening = sql<{ n: number }>`SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND state = 'idle' AND query LIKE 'LISTEN %'`;
        await eventually(async () => ((await listening.execute(db)).rows[0]?.n ?? 0) > 0, 5_000, 'the listener to listen');
        await db.updateTable('repositories').set({ path: '/srv/moved' }).execute();
        assert.equal((await cache.get('acme/app'))?.path, '/srv/app', 'kept: a change without a signal is not seen');
        await upsertRepository(db, { ...app, path: '/srv/moved-again' }, 2);
        await eventually(() => signals.includes('repositories'), 5_000, 'the signal of the change');
        assert.equal((await cache.get('acme/app'))?.path, '/srv/moved-again');
        signals.length = 0;
        assert.equal(await deleteRepository(db, 'acme/app'), true);
        await eventually(() => signals.includes('repositories'), 5_000, 'the signal of the removal');
        assert.equal(await cache.get('acme/app'), null);
      } finally {
        await listener.close();
      }
    });
  });
});
