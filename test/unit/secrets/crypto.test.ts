import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { chmod, readFile, stat, writeFile } from 'node:fs/promises';
import { describe, it } from 'node:test';
import { pino } from 'pino';
import { loadConfig } from '../../../src/config/index.ts';
import { ConfigError } from '../../../src/config/index.ts';
import {
  DecryptError,
  SECRET_OUTPUT_INFO,
  UPLOAD_INFO,
  decryptWithKey,
  encryptWithKey,
  generateX25519,
  keyVersionOf,
  open,
  openEnvelope,
  parseMasterKey,
  seal,
  sealEnvelope,
} from '../../../src/secrets/crypto.ts';
import { secretKeyPath, withSecretKey } from '../../../src/secrets/key-file.ts';
import { applicableScopes, formatScope, parseScope } from '../../../src/secrets/scopes.ts';
import { tempDir } from '../../support/database.ts';

const keyA = randomBytes(32);
const keyB = randomBytes(32);

describe('master key parsing', () => {
  it('takes 64 hex digits or base64 of 32 bytes, the same key either way', () => {
    assert.deepEqual(parseMasterKey(keyA.toString('hex')), keyA);
    assert.deepEqual(parseMasterKey(` ${keyA.toString('base64')}\n`), keyA);
  });
  it('refuses a wrong length with the reason, never the value', () => {
    const short = randomBytes(16).toString('base64');
    assert.throws(() => parseMasterKey(short), /must be 32 bytes .* decodes to 16 bytes/);
    assert.throws(() => parseMasterKey('not a key!'), (e: Error) => /must be 32 bytes/.test(e.message) && !e.message.includes('not a key'));
  });
  it('a wrong SWITCHYARD_SECRET_KEY is a ConfigError at startup that does not echo it', () => {
    const bad = 'abcd'.repeat(10);
    assert.throws(
      () => loadConfig({ SWITCHYARD_SECRET_KEY: bad }),
      (e: unknown) => e instanceof ConfigError && e.key === 'SWITCHYARD_SECRET_KEY' && !e.message.includes(bad),
    );
    assert.throws(() => loadConfig({ SWITCHYARD_SECRET_KEY: keyA.toString('hex'), SWITCHYARD_SECRET_KEY_OLD: 'xyz' }), (e: unknown) => e instanceof ConfigError && e.key === 'SWITCHYARD_SECRET_KEY_OLD');
    const config = loadConfig({ SWITCHYARD_SECRET_KEY: keyA.toString('hex'), SWITCHYARD_SECRET_KEY_OLD: keyB.toString('base64') });
    assert.deepEqual(config.secretKey, keyA);
    assert.deepEqual(config.secretKeyOld, keyB);
  });
});

describe('AES-256-GCM under the master key', () => {
  it('round-trips, with base64(IV 12 ‖ tag 16 ‖ ciphertext) and a fresh IV each time', () => {
    const sealed = seal({ current: keyA, old: null }, 'hunter2-value', 'global:API_KEY');
    const raw = Buffer.from(sealed.ciphertext, 'base64');
    assert.equal(raw.length, 12 + 16 + Buffer.byteLength('hunter2-value'));
    assert.equal(sealed.keyVersion, keyVersionOf(keyA));
    assert.equal(open({ current: keyA, old: null }, sealed, 'global:API_KEY').toString(), 'hunter2-value');
    assert.notEqual(seal({ current: keyA, old: null }, 'hunter2-value', 'global:API_KEY').ciphertext, sealed.ciphertext);
  });
  it('refuses the wrong AAD: a ciphertext moved to another scope or key does not open', () => {
    const sealed = seal({ current: keyA, old: null }, 'v', 'global:API_KEY');
    assert.throws(() => open({ current: keyA, old: null }, sealed, 'repo:acme/app:API_KEY'), DecryptError);
  });
  it('refuses the wrong key, and a tampered or truncated ciphertext', () => {
    const sealed = seal({ current: keyA, old: null }, 'value', 'global:K');
    assert.throws(() => open({ current: keyB, old: null }, sealed, 'global:K'), /does not open with neither/);
    const bytes = Buffer.from(sealed.ciphertext, 'base64');
    bytes[bytes.length - 1] = (bytes.at(-1) ?? 0) ^ 1;
    assert.throws(() => decryptWithKey(keyA, bytes.toString('base64'), 'global:K'), DecryptError);
    assert.throws(() => decryptWithKey(keyA, 'AAAA', 'global:K'), /at least 28/);
  });
  it('opens a value sealed under the old key while SWITCHYARD_SECRET_KEY_OLD is set, and only then', () => {
    const underOld = seal({ current: keyB, old: null }, 'legacy', 'env:prod:DB');
    assert.equal(open({ current: keyA, old: keyB }, underOld, 'env:prod:DB').toString(), 'legacy');
    assert.throws(() => open({ current: keyA, old: null }, underOld, 'env:prod:DB'), DecryptError);
  });
  it('rotation: reopened under the old key and sealed again, the value opens with the new key alone', () => {
    const keys = { current: keyA, old: keyB };
    const underOld = seal({ current: keyB, old: null }, 'rotate-me', 'global:R');
    const resealed = seal(keys, open(keys, underOld, 'global:R'), 'global:R');
    assert.equal(resealed.keyVersion, keyVersionOf(keyA));
    assert.equal(open({ current: keyA, old: null }, resealed, 'global:R').toString(), 'rotate-me');
  });
});

describe('X25519 envelopes (test uploads and secret outputs)', () => {
  it('a client-built blob opens with the upload key and the same HKDF info only', () => {
    const upload = generateX25519();
    const blob = sealEnvelope(upload.publicKey, JSON.stringify({ flat: { A: '1' } }), UPLOAD_INFO);
    assert.equal(openEnvelope(upload.privateKeyDer, blob.senderPublicKey, blob.encrypted, UPLOAD_INFO).toString(), '{"flat":{"A":"1"}}');
    assert.throws(() => openEnvelope(upload.privateKeyDer, blob.senderPublicKey, blob.encrypted, SECRET_OUTPUT_INFO), DecryptError);
    assert.throws(() => openEnvelope(generateX25519().privateKeyDer, blob.senderPublicKey, blob.encrypted, UPLOAD_INFO), DecryptError);
    assert.throws(() => openEnvelope(upload.privateKeyDer, 'bm90IGEga2V5', blob.encrypted, UPLOAD_INFO), /not a base64 SPKI/);
  });
  it('a plain AES key is not an envelope key', () => {
    const sealed = encryptWithKey(keyA, 'x');
    assert.equal(decryptWithKey(keyA, sealed).toString(), 'x');
  });
});

describe('the embedded master key file', () => {
  it('is generated with mode 0600 in the data dir and reused by the next start', async () => {
    const dataDir = await tempDir('sy-secret-key-');
    const config = loadConfig({ SWITCHYARD_DATA_DIR: dataDir });
    const first = await withSecretKey(config, pino({ level: 'silent' }));
    assert.equal(first.secretKey?.length, 32);
    assert.equal((await stat(secretKeyPath(dataDir))).mode & 0o777, 0o600);
    const second = await withSecretKey(loadConfig({ SWITCHYARD_DATA_DIR: dataDir }), pino({ level: 'silent' }));
    assert.deepEqual(second.secretKey, first.secretKey);
    assert.equal((await readFile(secretKeyPath(dataDir), 'utf8')).trim(), first.secretKey?.toString('hex'));
  });
  it('is not made with an external database, and a configured key wins over the file', async () => {
    const dataDir = await tempDir('sy-secret-key-');
    const external = await withSecretKey(loadConfig({ SWITCHYARD_DATA_DIR: dataDir, DATABASE_URL: 'postgres://x/y' }), pino({ level: 'silent' }));
    assert.equal(external.secretKey, undefined);
    await assert.rejects(stat(secretKeyPath(dataDir)));
    await writeFile(secretKeyPath(dataDir), 'short\n');
    await chmod(secretKeyPath(dataDir), 0o600);
    await assert.rejects(withSecretKey(loadConfig({ SWITCHYARD_DATA_DIR: dataDir }), pino({ level: 'silent' })), (e: unknown) => e instanceof ConfigError);
    const configured = await withSecretKey(loadConfig({ SWITCHYARD_DATA_DIR: dataDir, SWITCHYARD_SECRET_KEY: keyA.toString('hex') }), pino({ level: 'silent' }));
    assert.deepEqual(configured.secretKey, keyA);
  });
});

describe('scopes', () => {
  it('parses and formats every form, and refuses unknown ones with the list of forms', () => {
    for (const text of ['global', 'org:acme', 'repo:acme/app', 'repo:manual', 'env:prod', 'repo:acme/app/env:prod']) {
      const scope = parseScope(text);
      assert.ok(!('error' in scope), text);
      assert.equal(formatScope(scope), text);
    }
    for (const text of ['', 'team:x', 'org:', 'org:a/b', 'repo:a/b/c', 'env:', 'repo:acme/app/env:', 'GLOBAL']) {
      const scope = parseScope(text);
      assert.ok('error' in scope && scope.error.includes('global, org:<owner>'), text);
    }
  });
  it('lists the scopes of a job from the widest to the narrowest', () => {
    assert.deepEqual(
      applicableScopes('acme/app', ['prod']).map((s) => [s.scope, s.rank]),
      [['global', 0], ['org:acme', 1], ['repo:acme/app', 2], ['env:prod', 3], ['repo:acme/app/env:prod', 4]],
    );
    assert.deepEqual(applicableScopes('manual', []).map((s) => s.scope), ['global', 'repo:manual']);
  });
});
