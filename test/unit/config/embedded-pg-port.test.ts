import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { ConfigError, loadConfig } from '../../../src/config/index.ts';

function errorOf(env: NodeJS.ProcessEnv): ConfigError {
  try {
    loadConfig(env);
  } catch (error) {
    assert.ok(error instanceof ConfigError, `expected ConfigError, got ${String(error)}`);
    return error;
  }
  assert.fail('expected loadConfig to throw');
}

describe('SWITCHYARD_EMBEDDED_PG_PORT', () => {
  it('is unset by default (a free port is picked) and read as a number', () => {
    assert.equal(loadConfig({}).embeddedPgPort, undefined);
    assert.equal(loadConfig({ SWITCHYARD_EMBEDDED_PG_PORT: '' }).embeddedPgPort, undefined);
    assert.equal(loadConfig({ SWITCHYARD_EMBEDDED_PG_PORT: '5433' }).embeddedPgPort, 5433);
    assert.equal(loadConfig({ SWITCHYARD_EMBEDDED_PG_PORT: '1' }).embeddedPgPort, 1);
    assert.equal(loadConfig({ SWITCHYARD_EMBEDDED_PG_PORT: '65535' }).embeddedPgPort, 65535);
  });

  for (const [value, reason] of [
    ['0', 'must be at least 1'],
    ['65536', 'must be at most 65535'],
    ['54x', 'must be a whole number'],
    ['-1', 'must be a whole number'],
  ] as const) {
    it(`refuses ${JSON.stringify(value)}: ${reason}`, () => {
      const error = errorOf({ SWITCHYARD_EMBEDDED_PG_PORT: value });
      assert.equal(error.key, 'SWITCHYARD_EMBEDDED_PG_PORT');
      assert.equal(error.message, `Invalid SWITCHYARD_EMBEDDED_PG_PORT: ${reason} (got "${value}")`);
    });
  }
});
