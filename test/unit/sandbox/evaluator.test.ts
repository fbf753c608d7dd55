import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { IsolatedVmSandbox, SandboxDisposedError, type SandboxResult } from '../../../src/sandbox/index.ts';
import {
  ENVIRONMENT_EXPRESSION,
  ENV_EXPRESSION,
  pullRequestToDevelop,
  pushToMain,
  request,
} from './fixtures.ts';

const ENV_PREFIX = 'inline env of job deploy: ';
const VALUE_PREFIX = 'inline environments[0].value of job deploy: ';

function failed(result: SandboxResult): string {
  assert.equal(result.ok, false, `expected a failure, got ${JSON.stringify(result)}`);
  return result.ok ? '' : result.message;
}

describe('IsolatedVmSandbox results', () => {
  let sandbox: IsolatedVmSandbox;
  before(() => {
    sandbox = new IsolatedVmSandbox();
  });
  after(() => sandbox.dispose());

  it('picks the environment name from the target branch', async () => {
    assert.deepEqual(await sandbox.evaluate(request(ENVIRONMENT_EXPRESSION)), { ok: true, value: 'production' });
    assert.deepEqual(
      await sandbox.evaluate(request(ENVIRONMENT_EXPRESSION, 'string', { event: pullRequestToDevelop })),
      { ok: true, value: 'staging' },
    );
  });

  it('builds an env map from the payload, copied out as a plain host object', async () => {
    const result = await sandbox.evaluate(request(ENV_EXPRESSION, 'stringMap'));
    assert.deepEqual(result, { ok: true, value: { SHA: pushToMain.payload.after } });
    assert.ok(result.ok && Object.getPrototypeOf(result.value) === Object.prototype);
  });

  it('accepts realistic expressions over the envelope', async () => {
    const group = "(event) => `deploy-${event.targetBranch}-${event.sourceRepo.replace('/', '-')}`";
    assert.deepEqual(await sandbox.evaluate(request(group)), { ok: true, value: 'deploy-main-acme-widgets' });
    const env = `(event) => ({
      GIT_SHA: event.payload.after.slice(0, 7),
      DOCS_ONLY: String(event.changedFiles.every((file) => file.endsWith('.md'))),
      PUSHER: event.payload.pusher.name,
    })`;
    assert.deepEqual(await sandbox.evaluate(request(env, 'stringMap')), {
      ok: true,
      value: { GIT_SHA: '9f2c3b1', DOCS_ONLY: 'false', PUSHER: 'octocat' },
    });
  });

  it('accepts a null-prototype map and an empty map', async () => {
    const nullProto = "(e) => Object.assign(Object.create(null), { REF: e.payload.ref })";
    assert.deepEqual(await sandbox.evaluate(request(nullProto, 'stringMap')), {
      ok: true,
      value: { REF: 'refs/heads/main' },
    });
    assert.deepEqual(await sandbox.evaluate(request('(e) => ({})', 'stringMap')), { ok: true, value: {} });
  });

  it('binds event both as the argument and as the only global, as a JSON copy', async () => {
    assert.deepEqual(await sandbox.evaluate(request('() => event.senderUserId')), { ok: true, value: '583231' });
    const mutate = "(e) => { e.payload.after = 'tampered'; e.targetBranch = 'x'; return 'ok' }";
    assert.deepEqual(await sandbox.evaluate(request(mutate)), { ok: true, value: 'ok' });
    assert.equal(pushToMain.payload.after, '9f2c3b1e4d5a67890abcdef1234567890abcdef1');
    const withDate = { ...pushToMain, receivedAt: new Date(0), drop: () => 1 };
    const types = '(e) => typeof e.receivedAt + "," + typeof e.drop';
    assert.deepEqual(await sandbox.evaluate(request(types, 'string', { event: withDate })), {
      ok: true,
      value: 'string,undefined',
    });
  });

  it('compiles the expression as (<expression>), so a trailing line comment is harmless', async () => {
    const result = await sandbox.evaluate(request('(e) => e.type // push or tag'));
    assert.deepEqual(result, { ok: true, value: 'push' });
  });

  it('fails on an event that JSON cannot represent', async () => {
    const cyclic: Record<string, unknown> = { type: 'push' };
    cyclic.self = cyclic;
    const message = failed(await sandbox.evaluate(request('(e) => "x"', 'string', { event: cyclic })));
    assert.match(message, /^inline environments\[0\]\.value of job deploy: the event is not JSON-serializable: /);
  });
});

describe('IsolatedVmSandbox type and shape errors (EVAL-3, EVAL-4)', () => {
  let sandbox: IsolatedVmSandbox;
  before(() => {
    sandbox = new IsolatedVmSandbox();
  });
  after(() => sandbox.dispose());

  const stringCases: [string, string][] = [
    ['(e) => 42', 'expected a string, got a number'],
    ['(e) => undefined', 'expected a string, got undefined'],
    ['(e) => null', 'expected a string, got null'],
    ['(e) => ({ name: "production" })', 'expected a string, got an object'],
    ['(e) => ["production"]', 'expected a string, got an array'],
    ['(e) => Symbol("x")', 'expected a string, got a symbol'],
    ['(e) => 1n', 'expected a string, got a bigint'],
    ['(e) => (x) => x', 'returned a function'],
    ['"production"', 'the expression must evaluate to a function, got a string'],
    ['async (e) => "production"', 'returned a promise or thenable; inline expressions must be synchronous'],
    ['(e) => Promise.resolve("production")', 'returned a promise or thenable; inline expressions must be synchronous'],
    ['(e) => ({ then(resolve) { resolve("x") } })', 'returned a promise or thenable; inline expressions must be synchronous'],
    ['(e) => ', "SyntaxError: Unexpected token ')'"],
    ['(e) => { throw new Error("no environment for " + e.targetBranch) }', 'Error: no environment for main'],
    ['(e) => { throw "boom" }', 'threw "boom"'],
    ['(e) => { throw { code: 7 } }', 'threw an object that is not an Error'],
    ['(e) => e.payload.pull_request.head.ref', "TypeError: Cannot read properties of undefined (reading 'head')"],
  ];
  for (const [expression, error] of stringCases) {
    it(`string: ${expression} → ${error}`, async () => {
      assert.equal(failed(await sandbox.evaluate(request(expression))), VALUE_PREFIX + error);
    });
  }

  const mapCases: [string, string][] = [
    ['(e) => "SHA=1"', 'expected a plain object of strings, got a string'],
    ['(e) => null', 'expected a plain object of strings, got null'],
    ['(e) => [["SHA", "1"]]', 'expected a plain object of strings, got an array'],
    ['(e) => new Map([["SHA", "1"]])', 'expected a plain object of strings, got an object with a custom prototype'],
    ['(e) => ({ __proto__: { a: "b" } })', 'expected a plain object of strings, got an object with a custom prototype'],
    ['(e) => ({ SHA: e.payload.after, RETRIES: 3 })', 'value of "RETRIES" is a number, expected a string'],
    ['(e) => ({ SHA: e.payload.nope })', 'value of "SHA" is undefined, expected a string'],
    ['(e) => ({ NESTED: { A: "b" } })', 'value of "NESTED" is an object, expected a string'],
    ['(e) => ({ get SHA() { return "1" } })', 'property "SHA" is a getter or setter, expected a string value'],
    ['(e) => ({ [Symbol("s")]: "1" })', 'expected string keys, got Symbol(s)'],
    ['(e) => ({ ["__proto__"]: "1" })', 'the key "__proto__" is not allowed'],
    ['(e) => Object.defineProperty({}, "SHA", { value: "1" })', 'property "SHA" is not enumerable'],
    ['async (e) => ({ SHA: "1" })', 'returned a promise or thenable; inline expressions must be synchronous'],
  ];
  for (const [expression, error] of mapCases) {
    it(`env: ${expression} → ${error}`, async () => {
      assert.equal(failed(await sandbox.evaluate(request(expression, 'stringMap'))), ENV_PREFIX + error);
    });
  }

  it('puts the field and job name of the request in the message', async () => {
    const result = await sandbox.evaluate(
      request('(e) => 1', 'string', { field: 'concurrencyGroup', jobName: 'test (20)' }),
    );
    assert.equal(failed(result), 'inline concurrencyGroup of job test (20): expected a string, got a number');
  });
});

describe('IsolatedVmSandbox lifecycle', () => {
  it('serves concurrent callers one at a time, each with its own outcome', async () => {
    const sandbox = new IsolatedVmSandbox();
    try {
      const requests = Array.from({ length: 12 }, (_, i) =>
        i % 4 === 3 ? request('(e) => { while (true) {} }') : request(`(e) => e.targetBranch + "-${i}"`),
      );
      const results = await Promise.all(requests.map((each) => sandbox.evaluate(each)));
      results.forEach((result, i) => {
        if (i % 4 === 3) assert.equal(failed(result), `${VALUE_PREFIX}timed out after 100 ms`);
        else assert.deepEqual(result, { ok: true, value: `main-${i}` });
      });
    } finally {
      sandbox.dispose();
    }
  });

  it('rejects with SandboxDisposedError after dispose, and dispose is idempotent', async () => {
    const sandbox = new IsolatedVmSandbox();
    assert.equal((await sandbox.evaluate(request(ENVIRONMENT_EXPRESSION))).ok, true);
    sandbox.dispose();
    sandbox.dispose();
    await assert.rejects(sandbox.evaluate(request(ENVIRONMENT_EXPRESSION)), SandboxDisposedError);
  });

  it('rejects an evaluation that dispose interrupts instead of failing the job', async () => {
    const sandbox = new IsolatedVmSandbox({ timeoutMs: 10_000 });
    const running = sandbox.evaluate(request('(e) => { while (true) {} }'));
    const queued = sandbox.evaluate(request(ENVIRONMENT_EXPRESSION));
    await new Promise((resolve) => setTimeout(resolve, 50));
    sandbox.dispose();
    await assert.rejects(running, (error) => error instanceof SandboxDisposedError && error.jobName === 'deploy');
    await assert.rejects(queued, SandboxDisposedError);
  });

  it('validates its options', () => {
    assert.throws(() => new IsolatedVmSandbox({ timeoutMs: 0 }), RangeError);
    assert.throws(() => new IsolatedVmSandbox({ timeoutMs: 1.5 }), RangeError);
    assert.throws(() => new IsolatedVmSandbox({ memoryLimitMb: 4 }), RangeError);
  });

  it('refuses to start when node runs without --no-node-snapshot', async () => {
    const entry = fileURLToPath(new URL('../../../src/sandbox/index.ts', import.meta.url));
    const script = `const { IsolatedVmSandbox } = await import(${JSON.stringify(entry)});
      try { new IsolatedVmSandbox(); console.log('started'); } catch (error) { console.log(error.name); }`;
    const { stdout } = await promisify(execFile)(process.execPath, [
      '--import',
      'tsx',
      '--input-type=module',
      '--eval',
      script,
    ]);
    assert.equal(stdout.trim(), 'NodeSnapshotEnabledError');
  });

  it('keeps up a useful rate of evaluations on one isolate', async (t) => {
    const sandbox = new IsolatedVmSandbox();
    try {
      const count = 1000;
      const started = performance.now();
      for (let i = 0; i < count; i++) {
        const result = await sandbox.evaluate(request(ENVIRONMENT_EXPRESSION));
        assert.ok(result.ok);
      }
      const perSecond = Math.round(count / ((performance.now() - started) / 1000));
      t.diagnostic(`${perSecond} evaluations/s for a simple expression`);
      assert.ok(perSecond > 50, `${perSecond} evaluations/s`);
    } finally {
      sandbox.dispose();
    }
  });
});
