import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { coordinatorTarget, coordinatorUrl } from '../../../src/config/coordinator-target.ts';
import { ConfigError } from '../../../src/config/errors.ts';
import { tempDir } from '../../support/database.ts';

describe('coordinatorUrl: where commands find the coordinator', () => {
  it('defaults to the address switchyard start binds by default', () => {
    assert.equal(coordinatorUrl({}).href, 'http://127.0.0.1:8080/');
  });

  it('follows HOST and PORT as the server reads them; a wildcard bind is reached on loopback', () => {
    assert.equal(coordinatorUrl({ PORT: '9123' }).href, 'http://127.0.0.1:9123/');
    assert.equal(coordinatorUrl({ HOST: '0.0.0.0', PORT: '9124' }).href, 'http://127.0.0.1:9124/');
    assert.equal(coordinatorUrl({ HOST: '::', PORT: '9125' }).href, 'http://127.0.0.1:9125/');
    assert.equal(coordinatorUrl({ HOST: '::1', PORT: '9126' }).href, 'http://[::1]:9126/');
    assert.equal(coordinatorUrl({ HOST: 'ci.internal', PORT: '' }).href, 'http://ci.internal:8080/');
  });

  it('SWITCHYARD_URL wins over HOST/PORT, and --url over both', () => {
    const env = { SWITCHYARD_URL: 'https://ci.example.com/', PORT: '9000' };
    assert.equal(coordinatorUrl(env).href, 'https://ci.example.com/');
    assert.equal(coordinatorUrl(env, 'http://10.0.0.5:8081').href, 'http://10.0.0.5:8081/');
  });

  it('a malformed value is a ConfigError naming the variable', () => {
    for (const [env, override, key] of [
      [{ PORT: 'eighty' }, undefined, 'PORT'],
      [{ SWITCHYARD_URL: 'ftp://x' }, undefined, 'SWITCHYARD_URL'],
      [{}, 'not a url', '--url'],
    ] as const) {
      assert.throws(() => coordinatorUrl(env, override), (error: unknown) => error instanceof ConfigError && error.key === key);
    }
  });

  it('coordinatorTarget reads the admin token from the data dir as the server writes it', async () => {
    const dataDir = await tempDir();
    await writeFile(join(dataDir, 'admin-token'), 'sya_from_file\n');
    const target = await coordinatorTarget({ SWITCHYARD_DATA_DIR: dataDir, PORT: '9200' });
    assert.deepEqual([target.url.href, target.adminToken], ['http://127.0.0.1:9200/', 'sya_from_file']);
    const empty = await tempDir();
    await assert.rejects(coordinatorTarget({ SWITCHYARD_DATA_DIR: empty }), /set SWITCHYARD_ADMIN_TOKEN, or SWITCHYARD_DATA_DIR/);
  });
});
