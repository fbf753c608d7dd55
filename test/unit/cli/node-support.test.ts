import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { SUPPORTED_NODE_MAJORS, unsupportedNode } from '../../../src/cli/node-support.ts';

describe('supported Node lines', () => {
  it('accepts 24 and 26, and refuses 20, 22 and 25 with the lines to use', () => {
    assert.equal(unsupportedNode('v24.22.3'), null);
    assert.equal(unsupportedNode('v26.12.1'), null);
    for (const old of ['v20.20.2', 'v22.11.0', 'v25.1.0']) {
      assert.equal(unsupportedNode(old), `Node ${old} is not supported; use Node 24 or 26 (the README says how to get one without root)`);
    }
  });

  it('are the lines package.json promises, and the Node running the tests is one of them', () => {
    const { engines } = JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')) as { engines: { node: string } };
    assert.equal(engines.node, SUPPORTED_NODE_MAJORS.map((major) => `^${major}`).join(' || '));
    assert.equal(unsupportedNode(process.version), null);
  });
});
