import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { IsolatedVmSandbox, type SandboxResult } from '../../../src/sandbox/index.ts';
import { ENVIRONMENT_EXPRESSION, ENV_EXPRESSION, pushToMain, request } from './fixtures.ts';

const PREFIX = 'inline environments[0].value of job deploy: ';
const TIMED_OUT = `${PREFIX}timed out after 100 ms`;
const MEMORY_BOMB = '(e) => { const a = []; while (true) a.push(new Array(1e6).fill(1)); }';

function failed(result: SandboxResult): string {
  assert.equal(result.ok, false, `expected a failure, got ${JSON.stringify(result)}`);
  return result.ok ? '' : result.message;
}

/** Every hostile case is followed by ordinary evaluations: the sandbox must keep serving. */
async function assertStillServing(sandbox: IsolatedVmSandbox): Promise<void> {
  assert.deepEqual(await sandbox.evaluate(request(ENVIRONMENT_EXPRESSION)), { ok: true, value: 'production' });
  assert.deepEqual(await sandbox.evaluate(request(ENV_EXPRESSION, 'stringMap')), {
    ok: true,
    value: { SHA: pushToMain.payload.after },
  });
}

describe('IsolatedVmSandbox against hostile expressions', () => {
  let sandbox: IsolatedVmSandbox;
  before(() => {
    sandbox = new IsolatedVmSandbox();
  });
  after(() => sandbox.dispose());

  it('stops an infinite loop after about 100 ms', async () => {
    const started = performance.now();
    const result = await sandbox.evaluate(request('(e) => { while (true) {} }'));
    const elapsed = performance.now() - started;
    assert.equal(failed(result), TIMED_OUT);
    assert.ok(elapsed >= 90 && elapsed < 1000, `took ${Math.round(elapsed)} ms`);
    await assertStillServing(sandbox);
  });

  it('stops a memory bomb by the timeout or the memory limit, whichever trips first', async () => {
    const message = failed(await sandbox.evaluate(request(MEMORY_BOMB)));
    assert.match(message, /^inline environments\[0\]\.value of job deploy: (timed out after 100 ms|exceeded the 32 MB memory limit)$/);
    await assertStillServing(sandbox);
  });

  const timeouts: [string, string][] = [
    ['a getter on a thrown value', '(e) => { throw { get message() { while (true) {} } } }'],
    ['a proxy trap hit while checking the result', '(e) => new Proxy({}, { get() { while (true) {} } })'],
    ['Atomics.wait on a SharedArrayBuffer', '(e) => { Atomics.wait(new Int32Array(new SharedArrayBuffer(8)), 0, 0); return "x" }'],
    ['catastrophic regex backtracking', '(e) => /(a+)+$/.test("a".repeat(40) + "!") ? "y" : "n"'],
    ['a loop in a microtask after returning', '(e) => { Promise.resolve().then(() => { while (true) {} }); return "x" }'],
  ];
  for (const [name, expression] of timeouts) {
    it(`times out on ${name}`, async () => {
      assert.equal(failed(await sandbox.evaluate(request(expression))), TIMED_OUT);
      await assertStillServing(sandbox);
    });
  }

  const escapes: [string, string, string][] = [
    ['process', '(e) => process.env.HOME', 'ReferenceError: process is not defined'],
    ['require', '(e) => require("fs").readFileSync("/etc/passwd", "utf8")', 'ReferenceError: require is not defined'],
    [
      'the Function constructor',
      '(e) => globalThis.constructor.constructor("return process")().pid',
      'ReferenceError: process is not defined',
    ],
    ['unbounded recursion', '(e) => { const f = () => f(); return f() }', 'RangeError: Maximum call stack size exceeded'],
  ];
  for (const [name, expression, error] of escapes) {
    it(`fails cleanly on ${name}`, async () => {
      assert.equal(failed(await sandbox.evaluate(request(expression))), PREFIX + error);
      await assertStillServing(sandbox);
    });
  }

  it('fails cleanly on a dynamic import', async () => {
    assert.match(failed(await sandbox.evaluate(request('(e) => import("node:fs")'))), /^inline environments\[0\]\.value of job deploy: /);
    await assertStillServing(sandbox);
  });

  it('offers no host APIs: event is the only global besides the language built-ins', async () => {
    const hostApis = ['setTimeout', 'setInterval', 'setImmediate', 'queueMicrotask', 'fetch', 'require', 'module', 'Buffer'];
    const probe = `(e) => ${JSON.stringify(hostApis)}.filter((name) => typeof globalThis[name] !== 'undefined').join()`;
    assert.deepEqual(await sandbox.evaluate(request(probe)), { ok: true, value: '' });
    const lowercase = "(e) => Object.getOwnPropertyNames(globalThis).filter((n) => /^[a-z]/.test(n)).sort().join()";
    const result = await sandbox.evaluate(request(lowercase));
    assert.ok(result.ok && typeof result.value === 'string');
    const extras = result.value.split(',').filter((name) => !LANGUAGE_GLOBALS.has(name));
    assert.deepEqual(extras, ['event']);
  });

  it('does not leak prototype pollution into the next evaluation or the host', async () => {
    const pollute = "(e) => { Object.prototype.polluted = 'yes'; Array.prototype.map = null; return 'ok' }";
    assert.deepEqual(await sandbox.evaluate(request(pollute)), { ok: true, value: 'ok' });
    const check = "(e) => ({}).polluted === undefined && typeof [].map === 'function' ? 'clean' : 'leaked'";
    assert.deepEqual(await sandbox.evaluate(request(check)), { ok: true, value: 'clean' });
    assert.equal(({} as Record<string, unknown>).polluted, undefined);
    assert.equal(typeof [].map, 'function');
  });

  it('checks results with built-ins captured before the expression ran', async () => {
    const forgedPrototype = `(e) => {
      Reflect.getPrototypeOf = () => Object.prototype;
      Object.getPrototypeOf = () => Object.prototype;
      return Object.create({ SHA: 'inherited' });
    }`;
    assert.equal(
      failed(await sandbox.evaluate(request(forgedPrototype, 'stringMap'))),
      'inline env of job deploy: expected a plain object of strings, got an object with a custom prototype',
    );
    const forgedValue = `(e) => {
      Object.defineProperty(Object.prototype, 'value', { get() { return 'forged' } });
      return { get SHA() { return 'x' } };
    }`;
    assert.equal(
      failed(await sandbox.evaluate(request(forgedValue, 'stringMap'))),
      'inline env of job deploy: property "SHA" is a getter or setter, expected a string value',
    );
    const forgedJson = "(e) => { JSON.stringify = () => '{\"FORGED\":\"1\"}'; return { SHA: 'real' } }";
    assert.deepEqual(await sandbox.evaluate(request(forgedJson, 'stringMap')), { ok: true, value: { SHA: 'real' } });
    await assertStillServing(sandbox);
  });

  it('rejects an async function whose body would run later', async () => {
    const message = failed(await sandbox.evaluate(request('async (e) => { await null; while (true) {} }')));
    assert.ok(message === TIMED_OUT || message.endsWith('inline expressions must be synchronous'), message);
    await assertStillServing(sandbox);
  });
});

describe('IsolatedVmSandbox memory limit', () => {
  it('reports the memory limit and replaces the disposed isolate for the next call', async () => {
    // A long timeout so that the memory limit, not the clock, is what stops the bomb.
    const sandbox = new IsolatedVmSandbox({ timeoutMs: 10_000 });
    try {
      for (let round = 0; round < 2; round++) {
        assert.equal(failed(await sandbox.evaluate(request(MEMORY_BOMB))), `${PREFIX}exceeded the 32 MB memory limit`);
        await assertStillServing(sandbox);
      }
    } finally {
      sandbox.dispose();
    }
  });
});

/** Lower-case own properties of a V8 global object with no host additions. */
const LANGUAGE_GLOBALS = new Set([
  'console',
  'decodeURI',
  'decodeURIComponent',
  'encodeURI',
  'encodeURIComponent',
  'escape',
  'eval',
  'globalThis',
  'isFinite',
  'isNaN',
  'parseFloat',
  'parseInt',
  'undefined',
  'unescape',
]);
