import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { MAX_LOCK_FILE_BYTES, parseLockFile } from '../../../src/lockfile/parse.ts';
import { LockFileParseError } from '../../../src/lockfile/errors.ts';
import { FIXTURES, exampleWith, expectCorrupt, expectValid, specExampleText } from './helpers.ts';
import type { Json } from './helpers.ts';

const RECOMPILE = 'recompile with `kici compile`';

describe('parseLockFile: valid lock files', () => {
  const fixtures = readdirSync(FIXTURES).filter((file) => file.endsWith('.lock.json'));

  it('finds the seven KiCI fixtures', () => {
    assert.equal(fixtures.length, 7);
  });

  for (const file of fixtures) {
    it(`parses the fixture ${file} from bytes and from text`, () => {
      const bytes = readFileSync(join(FIXTURES, file));
      for (const input of [bytes, bytes.toString('utf8')]) {
        const result = parseLockFile(input);
        assert.ok(result.ok, result.ok ? '' : result.error.message);
        assert.equal(result.lock.schemaVersion, 29);
        assert.ok(result.lock.workflows.length > 0);
      }
    });
  }

  it('parses the example of lockfile.md §9 with its run steps, matrix and inline values', () => {
    const result = parseLockFile(specExampleText());
    assert.ok(result.ok, result.ok ? '' : result.error.message);
    const [workflow] = result.lock.workflows;
    assert.equal(workflow?.name, 'ci');
    assert.deepEqual(workflow.jobs.map((job) => (job._type === 'static' ? job.name : null)), ['lint', 'test', 'deploy']);
    assert.equal(workflow.triggers?.length, 2);
    const test = workflow.jobs[1];
    assert.ok(test?._type === 'static');
    assert.deepEqual(test.runsOn?.[1], { kind: 'regex', source: '^node-(20|22|24)$', flags: '' });
  });

  it('ignores unknown fields at every level and keeps them', () => {
    const lock = expectValid(
      exampleWith(
        [['generator'], 'hand'],
        [['workflows', 0, 'owner'], 'platform'],
        [['workflows', 0, 'triggers', 0, 'note'], 'x'],
        [['workflows', 0, 'jobs', 0, 'futureField'], { nested: true }],
        [['workflows', 0, 'jobs', 0, 'steps', 0, 'icon'], 'wrench'],
      ),
    );
    assert.ok('generator' in lock && lock.generator === 'hand');
  });

  it('accepts a null trigger entry and every trigger type of lockfile.md §4', () => {
    const triggers: Json[] = [
      null,
      { _type: 'tag', patterns: [{ type: 'glob', pattern: 'v*' }] },
      { _type: 'comment', actions: ['created'], source: 'pr', bodyMatch: { type: 'regex', pattern: '^/deploy\\b' } },
      { _type: 'review', actions: ['submitted'], states: ['approved'], repos: [{ type: 'glob', pattern: '!acme/old-*' }] },
      { _type: 'release', actions: ['published'] },
      { _type: 'dispatch', types: ['deploy'], inputs: { env: 'prod' } },
      { _type: 'create', refTypes: ['tag'], patterns: [] },
      { _type: 'status', contexts: ['ci/*'], states: ['success'] },
      { _type: 'workflow_run', actions: ['completed'], workflows: ['build'], conclusions: ['success'] },
      { _type: 'fork' },
      { _type: 'webhook', events: ['star'], actions: [] },
      { _type: 'generic_webhook', source: 'sentry', events: ['issue'], match: { '$.level': 'error' } },
      { _type: 'schedule', cronExpression: '0 3 * * *', timezone: 'UTC' },
      { _type: 'kici_event', eventName: 'deployed' },
      { _type: 'workflow_complete', name: 'ci', status: ['success'] },
      { _type: 'job_complete', workflow: 'ci', job: 'test' },
      { _type: 'lifecycle', events: ['job_failed'] },
    ];
    const lock = expectValid(exampleWith([['workflows', 0, 'triggers'], triggers]));
    assert.equal(lock.workflows[0]?.triggers?.[0], null);
  });

  it('accepts a lock file of exactly 5 MiB', () => {
    const text = specExampleText();
    const padded = text + ' '.repeat(MAX_LOCK_FILE_BYTES - Buffer.byteLength(text));
    assert.ok(parseLockFile(padded).ok);
  });
});

describe('parseLockFile: rule 1, the file itself', () => {
  it('refuses an empty file', () => {
    expectCorrupt('', { path: '$', rule: 'file', problem: 'empty' });
    expectCorrupt(Buffer.from(' \n'), { path: '$', rule: 'file', problem: 'empty' });
  });

  it('refuses text that is not JSON', () => {
    expectCorrupt('{"schemaVersion": 29,', { path: '$', rule: 'file', problem: 'not valid JSON' });
  });

  it('refuses a file over 5 MiB before reading it', () => {
    const error = expectCorrupt(Buffer.alloc(MAX_LOCK_FILE_BYTES + 1, 0x20), { path: '$', rule: 'file', problem: '5 MiB' });
    assert.ok(error instanceof LockFileParseError);
    assert.ok(error instanceof Error);
  });
});

describe('parseLockFile: rule 2, schemaVersion', () => {
  it('refuses a missing schemaVersion', () => {
    expectCorrupt(exampleWith([['schemaVersion'], undefined]), { path: '$.schemaVersion', rule: 'schema_version', problem: RECOMPILE });
  });

  it('refuses a schemaVersion that is not a number', () => {
    expectCorrupt(exampleWith([['schemaVersion'], '29']), { path: '$.schemaVersion', rule: 'schema_version', problem: RECOMPILE });
  });

  it('refuses any other schema version', () => {
    const error = expectCorrupt(exampleWith([['schemaVersion'], 28]), {
      path: '$.schemaVersion',
      rule: 'schema_version',
      problem: RECOMPILE,
    });
    assert.match(error.problem, /28/);
  });

  it('refuses a document that is not an object', () => {
    expectCorrupt('[]', { path: '$', rule: 'structure', problem: 'JSON object' });
  });
});

describe('parseLockFile: rule 3, structure', () => {
  it('reports a missing required field with its path', () => {
    expectCorrupt(exampleWith([['workflows', 0, 'jobs', 1, 'needs'], undefined]), {
      path: '$.workflows[0].jobs[1].needs',
      rule: 'structure',
      problem: 'missing required field `needs`',
    });
  });

  it('reports a wrong type with its path', () => {
    expectCorrupt(exampleWith([['workflows', 0, 'timeout'], '1h']), {
      path: '$.workflows[0].timeout',
      rule: 'structure',
      problem: 'expected number',
    });
  });

  it('reports an unknown trigger type', () => {
    expectCorrupt(exampleWith([['workflows', 0, 'triggers', 1, '_type'], 'pull_request']), {
      path: '$.workflows[0].triggers[1]._type',
      rule: 'structure',
      problem: 'unknown trigger `_type`',
    });
  });

  it('refuses a parallel group nested in a parallel group', () => {
    const inner = { kind: 'parallel', name: 'inner', failFast: true, children: [] };
    const group = { kind: 'parallel', name: 'outer', failFast: true, children: [inner] };
    expectCorrupt(exampleWith([['workflows', 0, 'jobs', 0, 'steps', 1], group]), {
      path: '$.workflows[0].jobs[0].steps[1].children[0].kind',
      rule: 'structure',
      problem: 'groups do not nest',
    });
  });

  it('refuses a need of an unknown shape', () => {
    expectCorrupt(exampleWith([['workflows', 0, 'jobs', 2, 'needs', 0], { name: 'test' }]), {
      path: '$.workflows[0].jobs[2].needs[0]',
      rule: 'structure',
      problem: 'a need must be',
    });
  });
});

describe('parseLockFile: rule 4, label matchers', () => {
  it('refuses a legacy plain-string label', () => {
    expectCorrupt(exampleWith([['workflows', 0, 'jobs', 2, 'runsOn', 0], 'deployer']), {
      path: '$.workflows[0].jobs[2].runsOn[0]',
      rule: 'label_matcher',
      problem: 'legacy plain-string label "deployer"',
    });
  });

  it('refuses an unknown matcher kind', () => {
    expectCorrupt(exampleWith([['workflows', 0, 'jobs', 1, 'excludeLabels', 0], { kind: 'glob', value: 'x*' }]), {
      path: '$.workflows[0].jobs[1].excludeLabels[0].kind',
      rule: 'label_matcher',
      problem: 'not a valid LabelMatcher',
    });
  });

  it('refuses a regex matcher without flags', () => {
    expectCorrupt(exampleWith([['workflows', 0, 'jobs', 1, 'runsOn', 1, 'flags'], undefined]), {
      path: '$.workflows[0].jobs[1].runsOn[1].flags',
      rule: 'label_matcher',
      problem: 'missing required field `flags`',
    });
  });

  it('refuses a plain string inside runsOnAll', () => {
    expectCorrupt(exampleWith([['workflows', 0, 'jobs', 0, 'runsOnAll'], { include: [['linux']], exclude: [] }]), {
      path: '$.workflows[0].jobs[0].runsOnAll.include[0][0]',
      rule: 'label_matcher',
      problem: 'legacy',
    });
  });
});
