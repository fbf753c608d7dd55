import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { compileRedactor, MASK, redactEnvVars, redactSecrets } from '../../../src/security/redact.ts';

const agentToken = `kat_${'0123456789abcdef'.repeat(4)}`;

describe('redactSecrets', () => {
  it('masks every occurrence of each secret of length 4 or more and leaves shorter ones', () => {
    assert.equal(redactSecrets('user=abc pass=hunter2 again hunter2', ['abc', 'hunter2']), 'user=abc pass=*** again ***');
  });

  it('masks the longest secret first, so a secret containing another is masked whole', () => {
    assert.equal(redactSecrets('key: password1234', ['pass', 'password1234']), 'key: ***');
    assert.equal(redactSecrets('key: password1234', ['password1234', 'pass']), 'key: ***');
  });

  it('masks each line of a multi-line secret, since logs arrive one line at a time', () => {
    const pem = '-----BEGIN KEY-----\nMIIBVwIBADANBgkq\n-----END KEY-----';
    assert.equal(redactSecrets('MIIBVwIBADANBgkq', [pem]), MASK);
    assert.equal(redactSecrets(`cat: ${pem}`, [pem]), `cat: ${MASK}`);
  });

  it('masks any kat_ agent token even when it is not among the secrets', () => {
    assert.equal(redactSecrets(`KICI_AGENT_TOKEN=${agentToken} next`, []), 'KICI_AGENT_TOKEN=*** next');
    assert.equal(redactSecrets(`a ${agentToken}${agentToken} b`, []), 'a ****** b');
  });

  it('masks the signature of a signed blob URL the stock agent prints, keeping the rest of the line', () => {
    const line = `[workflow-runner] Restoring deps from http://127.0.0.1:8080/blobs/objects/builds%2Fa?expires=1796668150009&signature=${'a1'.repeat(32)}`;
    assert.equal(redactSecrets(line, []), '[workflow-runner] Restoring deps from http://127.0.0.1:8080/blobs/objects/builds%2Fa?expires=1796668150009&signature=***');
  });

  it('leaves a kat_ prefix with fewer than 64 hex characters alone', () => {
    const prefix = agentToken.slice(0, 40);
    assert.equal(redactSecrets(prefix, []), prefix);
  });

  it('treats secrets literally, not as patterns', () => {
    assert.equal(redactSecrets('a.b*c a_b*c', ['a.b*c']), '*** a_b*c');
    assert.equal(redactSecrets('$1$2 keep', ['$1$2']), '*** keep');
  });

  it('returns the text unchanged without secrets, tokens or matches', () => {
    assert.equal(redactSecrets('plain log line', []), 'plain log line');
    assert.equal(redactSecrets('plain log line', ['absent-value']), 'plain log line');
  });

  it('compileRedactor masks like redactSecrets and is reusable across lines', () => {
    const redact = compileRedactor(['s3cr3t']);
    assert.deepEqual(['x s3cr3t', 'y', agentToken].map(redact), ['x ***', 'y', '***']);
  });
});

describe('redactEnvVars', () => {
  it('masks the whole value of variables whose name looks sensitive, in any case', () => {
    const names = ['KICI_AGENT_TOKEN', 'client_secret', 'DB_Password', 'API_KEY', 'AWS_CREDENTIALS', 'sshkeyfile'];
    const out = redactEnvVars(names.map((name) => ({ name, value: 'ab' })), []);
    assert.deepEqual(out.map((v) => v.value), names.map(() => MASK));
  });

  it('passes other values through redactSecrets and keeps name and category', () => {
    const out = redactEnvVars(
      [
        { name: 'DATABASE_URL', value: 'postgres://u:hunter2@db/x', category: 'secret' },
        { name: 'HOME', value: '/home/ci' },
        { name: 'RUNNER_ENV', value: `token ${agentToken}`, category: 'runner' },
      ],
      ['hunter2'],
    );
    assert.deepEqual(out, [
      { name: 'DATABASE_URL', value: 'postgres://u:***@db/x', category: 'secret' },
      { name: 'HOME', value: '/home/ci' },
      { name: 'RUNNER_ENV', value: 'token ***', category: 'runner' },
    ]);
  });

  it('does not modify its input', () => {
    const input = [{ name: 'GITHUB_TOKEN', value: 'ghp_x' }];
    redactEnvVars(input, []);
    assert.deepEqual(input, [{ name: 'GITHUB_TOKEN', value: 'ghp_x' }]);
  });
});
