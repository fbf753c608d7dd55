import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { readdir } from 'node:fs/promises';
import { createServer } from 'node:net';
import { describe, it } from 'node:test';
import { tempDir } from '../../support/database.ts';

describe('switchyard start on a PORT in use', () => {
  // Regression (issue "The first hour"): the database was set up and the admin token printed before the bind failed.
  it('fails at once naming PORT, before the embedded database, the master key or the admin token are made', async (t) => {
    const busy = createServer();
    await new Promise<void>((resolve) => busy.listen(0, '127.0.0.1', resolve));
    t.after(() => busy.close());
    const address = busy.address();
    const port = typeof address === 'object' && address ? address.port : 0;
    const dataDir = await tempDir('sy-port-');
    const child = spawn(process.execPath, ['--no-node-snapshot', '--import', 'tsx', 'src/cli/main.ts', 'start'], {
      env: { ...process.env, SWITCHYARD_DATA_DIR: dataDir, PORT: String(port), SWITCHYARD_SCALERS: '[]', DATABASE_URL: '' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    t.after(() => void child.kill('SIGKILL'));
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const code = await new Promise<number | null>((resolve) => child.once('close', resolve));
    assert.equal(code, 1, stderr);
    assert.match(stderr, new RegExp(`ConfigError: PORT ${port} on 127\\.0\\.0\\.1 is already in use .*set PORT to a free port`));
    assert.deepEqual(await readdir(dataDir), [], 'nothing was made in the data dir');
  });
});
