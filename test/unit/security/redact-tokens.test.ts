import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { redactTokens } from '../../../src/security/redact.ts';

const agentToken = `kat_${'0123456789abcdef'.repeat(4)}`;

describe('redactTokens', () => {
  const cases: [string, string][] = [
    ['/ws/observe?token=sya_0123456789abcdef', '/ws/observe?token=***'],
    ['/blobs/objects/caches%2Fa?expires=1&signature=9f86d081', '/blobs/objects/caches%2Fa?expires=1&signature=***'],
    ['/ws/observe?runId=r-1&token=secret-value&x=2', '/ws/observe?runId=r-1&token=***&x=2'],
    ['/api/v1/runs?TOKEN=abc#frag', '/api/v1/runs?TOKEN=***#frag'],
    ['https://h/cb?access_token=abc&agent_token=def', 'https://h/cb?access_token=***&agent_token=***'],
    ['/x?token=', '/x?token=***'],
    ['/x?token=a&token=b', '/x?token=***&token=***'],
    ['/x/sya_abc/y', '/x/***/y'],
    [`/ws/agent?t=${agentToken}`, '/ws/agent?t=***'],
    ['Bearer sya_Zz-9_', 'Bearer ***'],
  ];
  for (const [input, expected] of cases) {
    it(`${input} → ${expected}`, () => assert.equal(redactTokens(input), expected));
  }

  it('leaves text without tokens alone, including a path that only mentions the word', () => {
    for (const text of ['/api/v1/runs?limit=5&after=10', '/api/v1/agent-tokens', '/api/v1/agent-tokens/tok-1', 'plain message']) {
      assert.equal(redactTokens(text), text);
    }
  });
});
