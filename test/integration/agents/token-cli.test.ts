import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { it } from 'node:test';
import { runTokenCommand } from '../../../src/cli/token.ts';
import { findFreePort } from '../../../src/db/free-port.ts';
import { listAgentTokens, TOKEN_PATTERN, validateAgentToken } from '../../../src/db/agent-tokens.ts';
import type { Database } from '../../../src/db/database.ts';
import { describeEachKind, tempDir, withTestDatabase } from '../../support/database.ts';
import { startApiServer, type ApiServer } from './api-server.ts';

const ROOT = fileURLToPath(new URL('../../..', import.meta.url));
const T0 = 1_700_000_000_000;

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

async function run(argv: string[], env: NodeJS.ProcessEnv): Promise<Run> {
  const out = { stdout: '', stderr: '' };
  const io = {
    stdout: { write: (chunk: string) => ((out.stdout += chunk), true) },
    stderr: { write: (chunk: string) => ((out.stderr += chunk), true) },
  };
  const code = await runTokenCommand(argv, env, io);
  return { code, ...out };
}

async function withServer(kind: 'external' | 'embedded', fn: (api: ApiServer, database: Database) => Promise<void>) {
  await withTestDatabase(kind, async (database) => {
    const api = await startApiServer(database.db, T0);
    try {
      await fn(api, database);
    } finally {
      await api.close();
    }
  });
}

await describeEachKind('switchyard token', (kind) => {
  it('create prints only the token on stdout and the details on stderr', () =>
    withServer(kind, async (api, { db }) => {
      const env = { SWITCHYARD_ADMIN_TOKEN: api.adminToken };
      const result = await run(['create', '--labels', 'gpu, kici:role:builder', '--mandatory-labels=team:a', '--expires-in', '3600', '--url', api.url], env);
      assert.equal(result.code, 0, result.stderr);
      assert.match(result.stdout, /^kat_[0-9a-f]{64}\n$/);
      const token = result.stdout.trim();
      assert.match(result.stderr, new RegExp(`prefix ${token.slice(0, 12)}, expires ${new Date(T0 + 3_600_000).toISOString()}`));
      assert.match(result.stderr, /labels gpu,kici:role:builder, mandatory team:a/);
      const record = await validateAgentToken(db, token, T0);
      assert.deepEqual([record?.labels, record?.mandatoryLabels, record?.expiresAt], [['gpu', 'kici:role:builder'], ['team:a'], T0 + 3_600_000]);
    }));

  it('reads the admin token from <SWITCHYARD_DATA_DIR>/admin-token when the variable is unset', () =>
    withServer(kind, async (api) => {
      const dataDir = await tempDir();
      await writeFile(join(dataDir, 'admin-token'), `${api.adminToken}\n`, { mode: 0o600 });
      const result = await run(['create', '--url', api.url], { SWITCHYARD_DATA_DIR: dataDir });
      assert.equal(result.code, 0, result.stderr);
      assert.match(result.stdout.trim(), TOKEN_PATTERN);
    }));

  it('list shows prefixes and states, never a token; revoke revokes', () =>
    withServer(kind, async (api, { db }) => {
      const env = { SWITCHYARD_ADMIN_TOKEN: api.adminToken };
      const token = (await run(['create', '--url', api.url], env)).stdout.trim();
      const [record] = await listAgentTokens(db);
      assert.ok(record);
      const revoked = await run(['revoke', record.id, '--url', api.url], env);
      assert.equal(revoked.code, 0, revoked.stderr);
      assert.deepEqual(api.revoked.map((r) => r.id), [record.id]);
      const listed = await run(['list', '--url', api.url], env);
      assert.equal(listed.code, 0, listed.stderr);
      assert.match(listed.stdout, /^ID +PREFIX +TYPE +STATE/);
      assert.match(listed.stdout, new RegExp(`${record.id} +${token.slice(0, 12)} +static +revoked`));
      assert.ok(!listed.stdout.includes(token.slice(12)));
      const json = await run(['list', '--json', '--url', api.url], env);
      assert.equal((JSON.parse(json.stdout) as { tokens: unknown[] }).tokens.length, 1);
    }));

  it('an error answer from the coordinator exits 1 with its reason', () =>
    withServer(kind, async (api) => {
      const wrong = await run(['list', '--url', api.url], { SWITCHYARD_ADMIN_TOKEN: 'sya_wrong' });
      assert.equal(wrong.code, 1);
      assert.equal(wrong.stdout, '');
      assert.match(wrong.stderr, /answered 401 to GET \/api\/v1\/agent-tokens: unauthorized: a valid admin bearer token is required/);
      const unknown = await run(['revoke', 'no-such-id', '--url', api.url], { SWITCHYARD_ADMIN_TOKEN: api.adminToken });
      assert.equal(unknown.code, 1);
      assert.match(unknown.stderr, /answered 404 .*no agent token no-such-id/);
    }));

  it('a spawned CLI prints just the token, capturable from stdout', () =>
    withServer(kind, async (api, { db }) => {
      const script = "import('./src/cli/token.ts').then(m => m.runTokenCommand(process.argv.slice(1))).then(c => process.exit(c))";
      const { stdout, stderr } = await promisify(execFile)(
        process.execPath,
        ['--no-node-snapshot', '--import', 'tsx', '-e', script, '--', 'create', '--labels', 'a,b', '--url', api.url],
        { cwd: ROOT, env: { ...process.env, SWITCHYARD_ADMIN_TOKEN: api.adminToken }, timeout: 30_000 },
      );
      assert.match(stdout, /^kat_[0-9a-f]{64}\n$/);
      assert.match(stderr, /created agent token/);
      assert.deepEqual((await validateAgentToken(db, stdout.trim(), T0))?.labels, ['a', 'b']);
    }));
});

it('an unreachable coordinator exits 1 and says where it looked', async () => {
  const port = await findFreePort();
  const result = await run(['create', '--url', `http://127.0.0.1:${port}`], { SWITCHYARD_ADMIN_TOKEN: 'sya_x' });
  assert.equal(result.code, 1);
  assert.equal(result.stdout, '');
  assert.match(result.stderr, new RegExp(`cannot reach the coordinator at http://127.0.0.1:${port} \\(.*ECONNREFUSED.*\\)`));
});

it('without an admin token it exits 1 and names both sources', async () => {
  const dataDir = await tempDir();
  const result = await run(['list'], { SWITCHYARD_DATA_DIR: dataDir });
  assert.equal(result.code, 1);
  assert.match(result.stderr, /set SWITCHYARD_ADMIN_TOKEN, or SWITCHYARD_DATA_DIR/);
  assert.ok(result.stderr.includes(join(dataDir, 'admin-token')));
});

it('bad usage exits 2 with the usage, before contacting anything', async () => {
  for (const argv of [['create', '--expires-in', 'soon'], ['create', '--expires-in', '0'], ['create', '--bogus'], ['frobnicate'], ['revoke'], ['create', '--url', 'not a url']]) {
    const result = await run(argv, { SWITCHYARD_ADMIN_TOKEN: 'sya_x' });
    assert.equal(result.code, 2, argv.join(' '));
    assert.match(result.stderr, /usage: switchyard token/);
  }
  const help = await run(['--help'], {});
  assert.equal(help.code, 0);
  assert.match(help.stdout, /usage: switchyard token/);
});
