import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { exampleWith, expectCorrupt, expectValid } from './helpers.ts';
import type { Json } from './helpers.ts';

const regexMatcher = (source: string, flags = ''): Json => ({ kind: 'regex', source, flags });
const job = (name: string, needs: Json[]): Json => ({
  _type: 'static',
  name,
  needs,
  steps: [{ name: 'main', hasOutputs: false, run: 'true' }],
});

describe('parseLockFile: rule 5, regexes', () => {
  it('refuses a label matcher regex that does not compile', () => {
    expectCorrupt(exampleWith([['workflows', 0, 'jobs', 1, 'runsOn', 1], regexMatcher('^node-(20')]), {
      path: '$.workflows[0].jobs[1].runsOn[1].source',
      rule: 'regex',
      problem: 'does not compile',
    });
  });

  it('refuses a label matcher with invalid flags', () => {
    expectCorrupt(exampleWith([['workflows', 0, 'jobs', 1, 'runsOn', 1], regexMatcher('^node$', 'q')]), {
      path: '$.workflows[0].jobs[1].runsOn[1].source',
      rule: 'regex',
      problem: 'does not compile',
    });
  });

  it('refuses a ReDoS-prone excludeLabels matcher', () => {
    expectCorrupt(exampleWith([['workflows', 0, 'jobs', 1, 'excludeLabels', 0], regexMatcher('^(a+)+$')]), {
      path: '$.workflows[0].jobs[1].excludeLabels[0].source',
      rule: 'regex',
      problem: 'ReDoS-prone',
    });
  });

  it('refuses a ReDoS-prone matcher inside runsOnAll', () => {
    const fanout: Json = { include: [[{ kind: 'exact', value: 'linux' }, regexMatcher('(a*)*')]], exclude: [] };
    expectCorrupt(exampleWith([['workflows', 0, 'jobs', 0, 'runsOnAll'], fanout]), {
      path: '$.workflows[0].jobs[0].runsOnAll.include[0][1].source',
      rule: 'regex',
      problem: 'ReDoS-prone',
    });
  });

  it('refuses a ReDoS-prone branch pattern', () => {
    expectCorrupt(exampleWith([['workflows', 0, 'triggers', 0, 'branches', 1], { type: 'regex', pattern: '^(a|b*)+$' }]), {
      path: '$.workflows[0].triggers[0].branches[1].pattern',
      rule: 'regex',
      problem: 'ReDoS-prone',
    });
  });

  it('checks an excluded repo regex without its leading !', () => {
    const repos = (pattern: string): Json => [{ type: 'regex', pattern }];
    expectValid(exampleWith([['workflows', 0, 'triggers', 1, 'repos'], repos('!^acme/legacy-')]));
    expectCorrupt(exampleWith([['workflows', 0, 'triggers', 1, 'repos'], repos('!(acme+)+')]), {
      path: '$.workflows[0].triggers[1].repos[0].pattern',
      rule: 'regex',
      problem: 'ReDoS-prone',
    });
  });

  it('refuses a bodyMatch regex that does not compile', () => {
    const comment: Json = { _type: 'comment', actions: [], bodyMatch: { type: 'regex', pattern: '[unclosed' } };
    expectCorrupt(exampleWith([['workflows', 0, 'triggers', 1], comment]), {
      path: '$.workflows[0].triggers[1].bodyMatch.pattern',
      rule: 'regex',
      problem: 'does not compile',
    });
  });

  it('leaves globs alone', () => {
    expectValid(exampleWith([['workflows', 0, 'triggers', 0, 'branches', 0], { type: 'glob', pattern: '(a+)+' }]));
  });
});

describe('parseLockFile: rule 6, names and needs', () => {
  it('refuses duplicate workflow names at the second one', () => {
    const other: Json = {
      name: 'ci',
      source: { file: '.kici/workflows/other.ts', export: '#default' },
      contentHash: '',
      compileSchemaVersion: 0,
      triggers: [],
      jobs: [],
    };
    expectCorrupt(exampleWith([['workflows', 1], other]), {
      path: '$.workflows[1].name',
      rule: 'graph',
      problem: 'duplicate workflow name "ci"',
    });
  });

  it('refuses duplicate job names in a workflow', () => {
    expectCorrupt(exampleWith([['workflows', 0, 'jobs', 1, 'name'], 'lint']), {
      path: '$.workflows[0].jobs[1].name',
      rule: 'graph',
      problem: 'duplicate job name "lint"',
    });
  });

  it('refuses an unknown needs target, by name or by object', () => {
    expectCorrupt(exampleWith([['workflows', 0, 'jobs', 1, 'needs', 0], 'lnt']), {
      path: '$.workflows[0].jobs[1].needs[0]',
      rule: 'graph',
      problem: 'unknown needs target "lnt"',
    });
    expectCorrupt(exampleWith([['workflows', 0, 'jobs', 2, 'needs', 0], { name: 'tests', runOn: ['success'] }]), {
      path: '$.workflows[0].jobs[2].needs[0]',
      rule: 'graph',
      problem: 'unknown needs target "tests"',
    });
  });

  it('refuses a needs cycle and names it', () => {
    expectCorrupt(exampleWith([['workflows', 0, 'jobs'], [job('a', ['c']), job('b', ['a']), job('c', ['b'])]]), {
      path: '$.workflows[0].jobs[1].needs[0]',
      rule: 'graph',
      problem: 'needs cycle: a → c → b → a',
    });
  });

  it('refuses a job that needs itself', () => {
    expectCorrupt(exampleWith([['workflows', 0, 'jobs'], [job('a', []), job('b', ['a', 'b'])]]), {
      path: '$.workflows[0].jobs[1].needs[1]',
      rule: 'graph',
      problem: 'needs cycle: b → b',
    });
  });

  it('accepts a diamond and group needs', () => {
    const diamond = [job('a', []), job('b', ['a']), job('c', ['a']), job('d', ['b', 'c', { group: 'gen', runOn: ['success'] }])];
    expectValid(exampleWith([['workflows', 0, 'jobs'], diamond]));
  });
});

describe('parseLockFile: rule 7, inline expressions', () => {
  const environmentValue = ['workflows', 0, 'jobs', 2, 'environments', 0, 'value', 'expression'];

  it('refuses a function expression that is not an arrow', () => {
    expectCorrupt(exampleWith([environmentValue, 'function (event) { return "production"; }']), {
      path: '$.workflows[0].jobs[2].environments[0].value.expression',
      rule: 'expression',
      problem: 'found FunctionExpression',
    });
  });

  it('refuses two expressions', () => {
    expectCorrupt(exampleWith([environmentValue, '(e) => "a", (e) => "b"']), {
      path: '$.workflows[0].jobs[2].environments[0].value.expression',
      rule: 'expression',
      problem: 'found SequenceExpression',
    });
  });

  it('refuses a statement after the arrow function', () => {
    expectCorrupt(exampleWith([['workflows', 0, 'jobs', 2, 'concurrencyGroup', 'expression'], '(e) => "x"; process.exit(1)']), {
      path: '$.workflows[0].jobs[2].concurrencyGroup.expression',
      rule: 'expression',
      problem: 'code after the arrow function',
    });
  });

  it('refuses an inline env that does not parse', () => {
    expectCorrupt(exampleWith([['workflows', 0, 'jobs', 1, 'env'], { _type: 'inline', expression: '(event) => ({' }]), {
      path: '$.workflows[0].jobs[1].env.expression',
      rule: 'expression',
      problem: 'does not parse',
    });
  });

  it('accepts surrounding whitespace and comments', () => {
    expectValid(exampleWith([environmentValue, '  (event) => event.targetBranch /* branch */ // done\n']));
  });
});

describe('parseLockFile: rule 8, the run extension', () => {
  const ship = ['workflows', 0, 'jobs', 2, 'steps', 0];
  const lintStep = ['workflows', 0, 'jobs', 0, 'steps', 1];

  it('refuses an empty or blank run', () => {
    for (const run of ['', '  \n']) {
      expectCorrupt(exampleWith([[...ship, 'run'], run]), {
        path: '$.workflows[0].jobs[2].steps[0].run',
        rule: 'run_step',
        problem: 'non-empty',
      });
    }
  });

  it('refuses a run that is not a string', () => {
    expectCorrupt(exampleWith([[...ship, 'run'], ['./deploy.sh']]), {
      path: '$.workflows[0].jobs[2].steps[0].run',
      rule: 'run_step',
      problem: 'expected string',
    });
  });

  it('accepts bash, sh and an absolute shell path, and refuses others', () => {
    for (const shell of ['bash', 'sh', '/usr/bin/zsh']) expectValid(exampleWith([[...ship, 'shell'], shell]));
    for (const shell of ['zsh', 'bin/bash', '/']) {
      expectCorrupt(exampleWith([[...ship, 'shell'], shell]), {
        path: '$.workflows[0].jobs[2].steps[0].shell',
        rule: 'run_step',
        problem: '"bash", "sh" or an absolute path',
      });
    }
  });

  it('refuses an env that is not a string map', () => {
    expectCorrupt(exampleWith([[...ship, 'env', 'DEPLOY_ENV'], 3]), {
      path: '$.workflows[0].jobs[2].steps[0].env.DEPLOY_ENV',
      rule: 'run_step',
      problem: 'expected string',
    });
  });

  it('refuses an absolute or escaping workingDirectory', () => {
    for (const [directory, problem] of [
      ['/srv/infra', 'relative'],
      ['C:\\infra', 'relative'],
      ['../infra', '`..`'],
      ['infra/../../etc', '`..`'],
    ] as const) {
      expectCorrupt(exampleWith([[...ship, 'workingDirectory'], directory]), {
        path: '$.workflows[0].jobs[2].steps[0].workingDirectory',
        rule: 'run_step',
        problem,
      });
    }
    expectValid(exampleWith([[...ship, 'workingDirectory'], './infra/..deploy']));
  });

  it('refuses shell, env or workingDirectory without run', () => {
    for (const [field, value] of [['shell', 'bash'], ['env', { A: '1' }], ['workingDirectory', 'infra']] as const) {
      expectCorrupt(exampleWith([[...lintStep, 'run'], undefined], [[...lintStep, field], value]), {
        path: `$.workflows[0].jobs[0].steps[1].${field}`,
        rule: 'run_step',
        problem: `\`${field}\` is only valid next to \`run\``,
      });
    }
  });

  it('checks the children of a parallel group', () => {
    const group: Json = {
      kind: 'parallel',
      name: 'checks',
      failFast: true,
      children: [{ name: 'a', hasOutputs: false, run: 'true' }, { name: 'b', hasOutputs: false, workingDirectory: 'x' }],
    };
    expectCorrupt(exampleWith([lintStep, group]), {
      path: '$.workflows[0].jobs[0].steps[1].children[1].workingDirectory',
      rule: 'run_step',
      problem: 'only valid next to `run`',
    });
  });

  it('accepts steps without run (executed by the stock agent)', () => {
    const lock = expectValid(exampleWith([[...lintStep, 'run'], undefined]));
    assert.equal(lock.workflows.length, 1);
  });
});
