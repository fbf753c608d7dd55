import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { it } from 'node:test';
import { insertTestRunSecrets, secretsInScopes } from '../../../src/db/secrets.ts';
import { DecryptError, keyVersionOf } from '../../../src/secrets/crypto.ts';
import { DispatchedSecrets } from '../../../src/secrets/dispatched.ts';
import { SecretService, SecretsUnavailableError } from '../../../src/secrets/service.ts';
import { describeEachKind, withTestDatabase } from '../../support/database.ts';

const now = () => Date.now();

await describeEachKind('secret storage on a real database: rotation, attempt values, upload expiry', (kind) => {
  it('old key tried on decrypt; rotate-key re-encrypts secrets, run keys and upload keys in one go; then the old key is not needed', async () => {
    await withTestDatabase(kind, async ({ db }) => {
      const [oldKey, newKey, strangerKey] = [randomBytes(32), randomBytes(32), randomBytes(32)];
      const before = new SecretService({ db, keys: { current: oldKey, old: null }, now });
      await before.put('global', 'API_KEY', 'value-under-old-key', 'test');
      await before.put('repo:acme/app', 'DB', 'db-under-old-key', 'test');
      const runKey = await before.runPublicKey('run-1');
      await before.createUpload();
      await before.saveAttemptValues('dispatch-1', 'run-1', ['value-under-old-key']);

      const stranger = new SecretService({ db, keys: { current: strangerKey, old: null }, now });
      const rows = await secretsInScopes(db, ['global', 'repo:acme/app']);
      assert.throws(() => stranger.openRows(rows), DecryptError, 'a wrong master key opens nothing');

      const during = new SecretService({ db, keys: { current: newKey, old: oldKey }, now });
      assert.deepEqual(during.openRows(rows).map((r) => r.value).sort(), ['db-under-old-key', 'value-under-old-key'], 'the old key still opens rows');
      const counts = await during.rotate('test');
      assert.deepEqual(counts, { secrets: 2, run_keys: 1, test_uploads: 1, attempt_secrets: 1, alreadyCurrent: 0 });

      const after = new SecretService({ db, keys: { current: newKey, old: null }, now });
      const rotated = await secretsInScopes(db, ['global', 'repo:acme/app']);
      assert.ok(rotated.every((r) => r.keyVersion === keyVersionOf(newKey)));
      assert.deepEqual(after.openRows(rotated).map((r) => r.value).sort(), ['db-under-old-key', 'value-under-old-key']);
      assert.equal(await after.runPublicKey('run-1'), runKey, 'the run keeps its key pair');
      const [upload] = await db.selectFrom('test_uploads').select(['upload_id', 'key_version']).execute();
      assert.equal(upload?.key_version, keyVersionOf(newKey));
      assert.equal((await after.uploadKey(upload?.upload_id ?? '', true)).ok, true);
      assert.deepEqual(await after.attemptValues('dispatch-1'), ['value-under-old-key']);
      assert.throws(() => new SecretService({ db, keys: { current: oldKey, old: null }, now }).openRows(rotated), DecryptError, 'the retired key opens nothing now');
      assert.deepEqual(await after.rotate('test'), { secrets: 2, run_keys: 1, test_uploads: 1, attempt_secrets: 1, alreadyCurrent: 5 });
    });
  });

  it('a coordinator that did not send an attempt’s values (restarted, or a peer) loads them sealed and masks with them', async () => {
    await withTestDatabase(kind, async ({ db }) => {
      const keys = { current: randomBytes(32), old: null };
      const sender = new SecretService({ db, keys, now });
      await sender.saveAttemptValues('dispatch-9', 'run-9', ['the-planted-value']);
      const stored = await db.selectFrom('attempt_secrets').select('ciphertext').execute();
      assert.ok(stored.length === 1 && !stored[0]?.ciphertext.includes('the-planted-value'));
      const restarted = new SecretService({ db, keys, now });
      const store = { load: (id: string) => restarted.attemptValues(id), drop: (id: string) => restarted.dropAttemptValues(id) };
      const fresh = new DispatchedSecrets(10, store);
      assert.equal((await fresh.redactorFor('dispatch-9'))('echo the-planted-value'), 'echo ***');
      assert.equal((await fresh.redactorFor('unknown'))('kat_' + 'ab'.repeat(32)), '***', 'an attempt without values still masks agent tokens');
      fresh.ended('dispatch-9');
      await new Promise((resolve) => setTimeout(resolve, 100));
      assert.equal(await restarted.attemptValues('dispatch-9'), null, 'dropped after the attempt ended');
    });
  });

  it('an expired upload is refused for new runs (410) and deleted at the next upload unless a test run refers to it', async () => {
    await withTestDatabase(kind, async ({ db }) => {
      const service = new SecretService({ db, keys: { current: randomBytes(32), old: null }, now });
      const [kept, dropped] = [await service.createUpload(), await service.createUpload()];
      await db.updateTable('test_uploads').set({ expires_at: 1 }).execute();
      assert.deepEqual(await service.uploadKey(dropped.uploadId, true), { ok: false, status: 410, reason: `test upload ${dropped.uploadId} expired; ask for a new one` });
      assert.equal((await service.uploadKey(dropped.uploadId, false)).ok, true, 'a run made in time still dispatches');
      await insertTestRunSecrets(db, { runId: 'run-1', uploadId: kept.uploadId, senderPublicKey: 'pk', encryptedSecrets: 'ct', now: now() });
      await service.createUpload();
      const left = (await db.selectFrom('test_uploads').select('upload_id').execute()).map((r) => r.upload_id);
      assert.ok(left.includes(kept.uploadId) && !left.includes(dropped.uploadId) && left.length === 2);
      assert.deepEqual(await service.uploadKey(dropped.uploadId, true), { ok: false, status: 404, reason: `no test upload ${dropped.uploadId}` });
    });
  });

  it('a rotation that meets a row no key opens changes nothing (one transaction)', async () => {
    await withTestDatabase(kind, async ({ db }) => {
      const [keyA, keyB, keyC] = [randomBytes(32), randomBytes(32), randomBytes(32)];
      await new SecretService({ db, keys: { current: keyA, old: null }, now }).put('global', 'A', 'under-a', 'test');
      await new SecretService({ db, keys: { current: keyC, old: null }, now }).put('global', 'C', 'under-c', 'test');
      const before = await secretsInScopes(db, ['global']);
      await assert.rejects(new SecretService({ db, keys: { current: keyB, old: keyA }, now }).rotate('test'), DecryptError);
      assert.deepEqual(await secretsInScopes(db, ['global']), before);
      await assert.rejects(new SecretService({ db, keys: null, now }).rotate('test'), SecretsUnavailableError);
    });
  });
});
