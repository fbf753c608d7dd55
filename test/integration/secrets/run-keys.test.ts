import assert from 'node:assert/strict';
import { createPrivateKey, createPublicKey, randomBytes } from 'node:crypto';
import { it } from 'node:test';
import { sql } from 'kysely';
import { open } from '../../../src/secrets/crypto.ts';
import { RunKeyMaker } from '../../../src/secrets/run-keys.ts';
import { describeEachKind, withTestDatabase } from '../../support/database.ts';

const keys = { current: randomBytes(32), old: null };
const now = () => Date.now();

await describeEachKind('run keys, made off the thread and stored a batch at a time', (kind) => {
  it('gives each of many runs asked for at once a stored pair whose sealed private key matches its public key', async () => {
    await withTestDatabase(kind, async ({ db }) => {
      const maker = new RunKeyMaker({ db, keys: () => keys, now });
      const runIds = Array.from({ length: 60 }, (_, i) => `run-${i}`);
      const publicKeys = await Promise.all(runIds.map((runId) => maker.make(runId)));
      const rows = await db.selectFrom('run_keys').select(['run_id', 'public_key', 'private_key', 'key_version']).orderBy('run_id').execute();
      assert.equal(rows.length, runIds.length);
      for (const row of rows) {
        assert.equal(row.public_key, publicKeys[runIds.indexOf(row.run_id)], 'the answer is the stored key');
        const privateKey = createPrivateKey({ key: open(keys, { ciphertext: row.private_key, keyVersion: row.key_version }, `run-key:${row.run_id}`), format: 'der', type: 'pkcs8' });
        assert.equal(createPublicKey(privateKey).export({ type: 'spki', format: 'der' }).toString('base64'), row.public_key);
      }
      assert.equal(new Set(publicKeys).size, runIds.length, 'a pair of its own for every run');
    });
  });

  it('answers the key a run already has, and after a failed write the next one works', async () => {
    await withTestDatabase(kind, async ({ db }) => {
      const first = new RunKeyMaker({ db, keys: () => keys, now });
      const kept = await first.make('run-kept');
      const second = new RunKeyMaker({ db, keys: () => keys, now });
      assert.equal(await second.make('run-kept'), kept, 'a run’s key is made once, whoever asks first');

      await sql`ALTER TABLE run_keys RENAME TO run_keys_away`.execute(db);
      const failed = await Promise.allSettled([second.make('run-a'), second.make('run-b')]);
      assert.deepEqual(failed.map((outcome) => outcome.status), ['rejected', 'rejected']);
      await sql`ALTER TABLE run_keys_away RENAME TO run_keys`.execute(db);
      assert.ok(await second.make('run-a'));
      const stored = await db.selectFrom('run_keys').select('run_id').orderBy('run_id').execute();
      assert.deepEqual(stored.map((row) => row.run_id), ['run-a', 'run-kept']);
    });
  });
});
