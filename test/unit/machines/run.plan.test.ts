import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { planRun } from '../../../machines/run.plan.ts';
import type { PlanRunOptions } from '../../../machines/run.plan.ts';
import type { LockFile, LockStaticJob, LockWorkflow } from '../../../machines/lock.types.ts';
import type { JobPlan } from '../../../machines/run.types.ts';
import { DEFAULT_JOB_TIMEOUTS } from '../../../machines/types.ts';

const FIXTURES = '/work/shared/fixtures/kici-lockfiles';

function readLockFile(file: string): LockFile {
  return JSON.parse(readFileSync(join(FIXTURES, file), 'utf8')) as LockFile;
}

function job(name: string, fields: Partial<LockStaticJob> = {}): LockStaticJob {
  return { _type: 'static', name, needs: [], steps: [{ name: 'main', hasOutputs: false }], ...fields };
}

function workflow(jobs: LockWorkflow['jobs'], fields: Partial<LockWorkflow> = {}): LockWorkflow {
  return { name: 'ci', jobs, ...fields };
}

function plan(wf: LockWorkflow, options: Partial<PlanRunOptions> = {}) {
  return planRun({
    runId: 'run-1',
    createdAt: 1_000,
    workflow: wf,
    timeouts: DEFAULT_JOB_TIMEOUTS,
    maxAttempts: 5,
    repository: 'acme/app',
    ...options,
  });
}

function keysOf(wf: LockWorkflow, options: Partial<PlanRunOptions> = {}): string[] {
  return plan(wf, options).jobs.map((p) => p.key);
}

function onlyJob(wf: LockWorkflow, options: Partial<PlanRunOptions> = {}): JobPlan {
  const { jobs } = plan(wf, options);
  assert.equal(jobs.length, 1);
  return jobs[0]!;
}

function matrixJob(fields: Partial<LockStaticJob>): LockWorkflow {
  return workflow([job('test', fields)]);
}

describe('planRun on the KiCI fixture lock files', () => {
  const expectedKeys: Record<string, Record<string, string[]>> = {
    'dyn.lock.json': { 'dynamic-deploy': ['deploy'] },
    'hello-fanout-chain.lock.json': { chain: ['c', 'd'], fanout: ['__init__fanout__a', 'a', 'b'], 'hello-world': ['greet'] },
    'hello-plus-fanout.lock.json': { fanout: ['__init__fanout__a', 'a', 'b'], 'hello-world': ['greet'] },
    'hello.lock.json': { 'hello-world': ['greet'] },
    'kici-root-build.lock.json': { build: ['install-build-test'] },
    'mise.lock.json': { 'mise-init': ['build'], 'mise-preset': ['build'] },
    'multi.lock.json': { ci: ['__init__ci__test', 'test', 'deploy'], 'parallel-checks': ['checks'], 'wait-for-marker': ['producer', 'consumer'] },
  };

  it('covers every fixture in the directory', () => {
    const files = readdirSync(FIXTURES).filter((file) => file.endsWith('.lock.json')).sort();
    assert.deepEqual(files, Object.keys(expectedKeys).sort());
  });

  for (const [file, byWorkflow] of Object.entries(expectedKeys)) {
    it(`plans every workflow of ${file} with the expected job keys`, () => {
      const lock = readLockFile(file);
      const planned = Object.fromEntries(lock.workflows.map((wf) => [wf.name, keysOf(wf)]));
      assert.deepEqual(planned, byWorkflow);
    });
  }

  it('plans a dynamic-matrix job as an init job on a KiCI init runner and a template, its downstream on the base name (DAG-6)', () => {
    const fanout = readLockFile('hello-fanout-chain.lock.json').workflows.find((wf) => wf.name === 'fanout');
    assert.ok(fanout);
    const [init, a, b] = plan(fanout).jobs;
    assert.equal(init?.key, '__init__fanout__a');
    assert.deepEqual(init?.initFor, {
      targetJobName: 'a',
      flags: { dynamicEnvironment: false, dynamicEnv: false, dynamicConcurrencyGroup: false, dynamicMatrix: true },
    });
    assert.equal(init?.requirements.executor, 'kici');
    assert.deepEqual(init?.requirements.runsOn[0], { kind: 'exact', value: 'kici:role:init-runner' });
    assert.equal(init?.timeouts.jobTimeoutMs, 60_000);
    assert.deepEqual(init?.needs, []);
    assert.equal(a?.key, 'a');
    assert.equal(a?.template, true);
    assert.equal(a?.initJob, '__init__fanout__a');
    assert.equal(a?.initFailure, null);
    assert.deepEqual(b?.needs, [{ name: 'a', runOn: ['success'] }]);
    assert.equal(b?.initFailure, null);
    assert.equal(b?.initJob, undefined);
  });

  it('plans the hello fixture with the job requirements and default timeouts', () => {
    const [greet] = plan(readLockFile('hello.lock.json').workflows[0]!).jobs;
    assert.deepEqual(greet, {
      key: 'greet',
      baseName: 'greet',
      fanoutIndex: null,
      fanoutTotal: null,
      matrixValues: null,
      needs: [],
      maxParallel: null,
      failFast: false,
      requirements: {
        runsOn: [{ kind: 'exact', value: 'kici:os:linux' }],
        excludeLabels: [],
        runsOnPick: 'deterministic',
        executor: 'kici',
      },
      timeouts: { ...DEFAULT_JOB_TIMEOUTS, cancelGraceMs: 60_000, jobTimeoutMs: null },
      concurrency: null,
      initFailure: null,
    });
  });

  it('treats inline env and environments as pure (evaluated elsewhere), not as init-job work', () => {
    const deploy = onlyJob(readLockFile('dyn.lock.json').workflows[0]!);
    assert.equal(deploy.initFailure, null);
  });
});

describe('planRun matrix expansion', () => {
  it('expands the map form as a cartesian product in key order', () => {
    const { jobs } = plan(matrixJob({ matrix: { _type: 'static', values: { os: ['linux', 'mac'], node: [20, '22'] } } }));
    assert.deepEqual(
      jobs.map((p) => [p.key, p.baseName, p.fanoutIndex, p.fanoutTotal, p.matrixValues]),
      [
        ['test (linux, 20)', 'test', 0, 4, { os: 'linux', node: '20' }],
        ['test (linux, 22)', 'test', 1, 4, { os: 'linux', node: '22' }],
        ['test (mac, 20)', 'test', 2, 4, { os: 'mac', node: '20' }],
        ['test (mac, 22)', 'test', 3, 4, { os: 'mac', node: '22' }],
      ],
    );
  });

  it('appends include entries, in matrix key order, with extra keys after', () => {
    const keys = keysOf(
      matrixJob({
        matrix: { _type: 'static', values: { os: ['linux'], node: ['20'] } },
        include: [{ node: '24', os: 'win' }, { os: 'bsd', node: '18', arch: 'arm' }],
      }),
    );
    assert.deepEqual(keys, ['test (linux, 20)', 'test (win, 24)', 'test (bsd, 18, arm)']);
  });

  it('removes every combination agreeing on all keys of an exclude entry', () => {
    const values = { os: ['linux', 'mac', 'win'], node: ['20', '22'] };
    const keys = keysOf(
      matrixJob({ matrix: { _type: 'static', values }, exclude: [{ os: 'mac' }, { os: 'win', node: '20' }, { arch: 'arm' }] }),
    );
    assert.deepEqual(keys, ['test (linux, 20)', 'test (linux, 22)', 'test (win, 22)']);
  });

  it('applies exclude to the product before include, so an include is never excluded', () => {
    const keys = keysOf(
      matrixJob({ matrix: { _type: 'static', values: { os: ['linux', 'mac'] } }, exclude: [{ os: 'mac' }], include: [{ os: 'mac' }] }),
    );
    assert.deepEqual(keys, ['test (linux)', 'test (mac)']);
  });

  it('drops duplicate combinations from values, the array form and include', () => {
    assert.deepEqual(keysOf(matrixJob({ matrix: { _type: 'static', values: { os: ['a', 'a', 'b'] } } })), ['test (a)', 'test (b)']);
    assert.deepEqual(
      keysOf(matrixJob({ matrix: { _type: 'static', values: [{ os: 'a', n: '1' }, { n: 1, os: 'a' }, 'x', 'x'] } })),
      ['test (a, 1)', 'test (x)'],
    );
    const withInclude = plan(matrixJob({ matrix: { _type: 'static', values: { os: ['a'] } }, include: [{ os: 'a' }, { os: 'b' }] }));
    assert.deepEqual(
      withInclude.jobs.map((p) => [p.key, p.fanoutIndex, p.fanoutTotal]),
      [['test (a)', 0, 2], ['test (b)', 1, 2]],
    );
  });

  it('lists combinations directly in the array form', () => {
    const { jobs } = plan(matrixJob({ matrix: { _type: 'static', values: [{ os: 'linux', arch: 'x64' }, { os: 'mac', arch: 'arm64' }] } }));
    assert.deepEqual(
      jobs.map((p) => [p.key, p.matrixValues]),
      [
        ['test (linux, x64)', { os: 'linux', arch: 'x64' }],
        ['test (mac, arm64)', { os: 'mac', arch: 'arm64' }],
      ],
    );
  });

  it('turns a scalar v of the array form into {value: v}', () => {
    const { jobs } = plan(matrixJob({ matrix: { _type: 'static', values: ['18', 20, true] } }));
    assert.deepEqual(
      jobs.map((p) => [p.key, p.matrixValues]),
      [
        ['test (18)', { value: '18' }],
        ['test (20)', { value: '20' }],
        ['test (true)', { value: 'true' }],
      ],
    );
  });

  it('fails the job with matrix_expansion on zero combinations', () => {
    for (const fields of [
      { matrix: { _type: 'static', values: { os: [] } } },
      { matrix: { _type: 'static', values: [] } },
      { matrix: { _type: 'static', values: { os: ['a', 'b'] } }, exclude: [{ os: 'a' }, { os: 'b' }] },
    ] satisfies Partial<LockStaticJob>[]) {
      const only = onlyJob(matrixJob(fields));
      assert.equal(only.key, 'test');
      assert.equal(only.fanoutIndex, null);
      assert.equal(only.matrixValues, null);
      assert.deepEqual(only.initFailure, {
        scope: 'job',
        category: 'matrix_expansion',
        message: 'job test: the matrix expands to zero combinations',
        jobName: 'test',
      });
    }
  });

  it('accepts 256 combinations and fails 257 with matrix_expansion', () => {
    const axis = (n: number) => Array.from({ length: n }, (_, i) => `v${i}`);
    const full = plan(matrixJob({ matrix: { _type: 'static', values: { a: axis(16), b: axis(16) } } })).jobs;
    assert.equal(full.length, 256);
    assert.equal(full.at(-1)?.key, 'test (v15, v15)');
    assert.equal(full.at(-1)?.fanoutTotal, 256);

    const overByInclude = onlyJob(matrixJob({ matrix: { _type: 'static', values: { a: axis(16), b: axis(16) } }, include: [{ a: 'x', b: 'y' }] }));
    assert.equal(overByInclude.initFailure?.category, 'matrix_expansion');
    assert.equal(overByInclude.initFailure?.message, 'job test: the matrix expands to more than 256 combinations');

    const overByValues = onlyJob(matrixJob({ matrix: { _type: 'static', values: { a: axis(257) } } }));
    assert.equal(overByValues.initFailure?.category, 'matrix_expansion');
  });

  it('stays fast on a huge product: excluded branches are cut, an undecidable one fails instead of hanging', () => {
    const axis = (n: number) => Array.from({ length: n }, (_, i) => `v${i}`);
    const exclude = axis(1000).slice(2).map((value) => ({ a: value }));
    const pruned = plan(matrixJob({ matrix: { _type: 'static', values: { a: axis(1000), b: axis(1000), c: ['x'] } }, exclude }));
    assert.equal(pruned.jobs[0]?.initFailure?.category, 'matrix_expansion');
    assert.match(pruned.jobs[0]?.initFailure?.message ?? '', /more than 256/);

    const small = plan(matrixJob({ matrix: { _type: 'static', values: { a: axis(1000), b: ['1', '2'] } }, exclude }));
    assert.deepEqual(small.jobs.map((p) => p.key), ['test (v0, 1)', 'test (v0, 2)', 'test (v1, 1)', 'test (v1, 2)']);

    const allExcluded = axis(1000).map((value) => ({ c: value }));
    const started = performance.now();
    const huge = onlyJob(matrixJob({ matrix: { _type: 'static', values: { a: axis(1000), b: axis(1000), c: axis(1000) } }, exclude: allExcluded }));
    assert.ok(performance.now() - started < 5_000);
    assert.equal(huge.initFailure?.category, 'matrix_expansion');
    assert.match(huge.initFailure?.message ?? '', /too large to expand/);
  });

  it('fails the job when two combinations would get the same child name', () => {
    const only = onlyJob(matrixJob({ matrix: { _type: 'static', values: [{ a: '1', b: '2' }, { a: '1, 2' }] } }));
    assert.equal(only.initFailure?.category, 'matrix_expansion');
    assert.match(only.initFailure?.message ?? '', /same child name test \(1, 2\)/);
  });

  it('copies maxParallel and failFast onto every child', () => {
    const { jobs } = plan(matrixJob({ matrix: { _type: 'static', values: { n: ['1', '2', '3'] } }, maxParallel: 2, failFast: true }));
    assert.deepEqual(jobs.map((p) => [p.maxParallel, p.failFast]), [[2, true], [2, true], [2, true]]);
  });

  it('fails runsOnAll with matrix_expansion "runsOnAll is not supported"', () => {
    const only = onlyJob(workflow([job('hosts', { runsOnAll: { include: [[{ kind: 'exact', value: 'linux' }]], exclude: [] } })]));
    assert.deepEqual(only.initFailure, {
      scope: 'job',
      category: 'matrix_expansion',
      message: 'runsOnAll is not supported',
      jobName: 'hosts',
    });
  });
});

describe('planRun needs, generators and init-job work', () => {
  it('normalises every needs form and drops group needs', () => {
    const wf = workflow([
      job('a'),
      job('b'),
      job('c', { needs: ['a', { name: 'b', runOn: ['failed', 'timed_out_stale'] }, { group: 'shards', runOn: ['success'] }] }),
    ]);
    assert.deepEqual(plan(wf).jobs[2]?.needs, [
      { name: 'a', runOn: ['success'] },
      { name: 'b', runOn: ['failed', 'timed_out_stale'] },
    ]);
  });

  it('gives every matrix child the needs of its job', () => {
    const wf = workflow([job('build'), job('test', { needs: ['build'], matrix: { _type: 'static', values: { n: ['1', '2'] } } })]);
    assert.deepEqual(
      plan(wf).jobs.map((p) => [p.key, p.needs]),
      [
        ['build', []],
        ['test (1)', [{ name: 'build', runOn: ['success'] }]],
        ['test (2)', [{ name: 'build', runOn: ['success'] }]],
      ],
    );
  });

  it('plans a job generator as a failed __dynamic__ job', () => {
    const wf = workflow([{ _type: 'dynamic', source: { file: '.kici/workflows/ci.ts', index: 1 }, group: 'shards' }, job('after', { needs: [{ group: 'shards', runOn: ['success'] }] })]);
    const [generator, after] = plan(wf).jobs;
    assert.equal(generator?.key, '__dynamic__ci__1');
    assert.equal(generator?.initFailure?.category, 'dynamic_eval');
    assert.match(generator?.initFailure?.message ?? '', /group shards in \.kici\/workflows\/ci\.ts is not supported/);
    assert.deepEqual(after?.needs, []);
    assert.equal(after?.initFailure, null);
  });

  it('gives a job whose impure concurrency group, env or environment name an init job that evaluates just those fields', () => {
    const none = { dynamicEnvironment: false, dynamicEnv: false, dynamicConcurrencyGroup: false, dynamicMatrix: false };
    const cases: [Partial<LockStaticJob>, Partial<typeof none>][] = [
      [{ dynamicConcurrencyGroup: true }, { dynamicConcurrencyGroup: true }],
      [{ dynamicEnv: true }, { dynamicEnv: true }],
      [{ environments: [{ value: 'staging', dynamic: false }, { value: '', dynamic: true }] }, { dynamicEnvironment: true }],
    ];
    for (const [fields, flags] of cases) {
      const [init, deploy] = plan(workflow([job('deploy', { runsOn: [{ kind: 'exact', value: 'kici:os:linux' }], ...fields })])).jobs;
      assert.equal(init?.key, '__init__ci__deploy');
      assert.deepEqual(init?.initFor, { targetJobName: 'deploy', flags: { ...none, ...flags } });
      assert.deepEqual(init?.requirements.runsOn.map((m) => (m.kind === 'exact' ? m.value : m.source)), ['kici:role:init-runner', 'kici:os:linux']);
      assert.equal(deploy?.initJob, '__init__ci__deploy');
      assert.equal(deploy?.template, undefined);
      assert.equal(deploy?.initFailure, null);
      assert.equal(deploy?.concurrency, null);
    }
  });

  it('fails a job with the inline-evaluation error given for it, and only that job', () => {
    const error = { scope: 'job' as const, category: 'dynamic_eval' as const, message: 'expression threw: boom' };
    const wf = workflow([job('deploy', { matrix: { _type: 'static', values: { n: ['1', '2'] } } }), job('lint')]);
    const { jobs } = plan(wf, { jobErrors: { deploy: error } });
    assert.deepEqual(jobs.map((p) => [p.key, p.initFailure]), [
      ['deploy', { ...error, jobName: 'deploy' }],
      ['lint', null],
    ]);
  });

  it('ignores prototype names when looking up per-job results', () => {
    const only = onlyJob(workflow([job('constructor', { concurrencyGroup: { _type: 'inline', expression: '() => "x"' } })]));
    assert.equal(only.initFailure?.category, 'dynamic_eval');
  });

  it('carries a run-scope init failure through unchanged', () => {
    const failure = { scope: 'run' as const, category: 'secret_resolution' as const, message: 'secret X missing' };
    assert.deepEqual(plan(workflow([job('a')]), { initFailure: failure }).initFailure, failure);
  });
});

describe('planRun concurrency, requirements and timeouts', () => {
  it('scopes a job-level key by repository with the default policy', () => {
    const only = onlyJob(workflow([job('deploy', { concurrencyGroup: 'deploy-main' })]));
    assert.deepEqual(only.concurrency, { key: 'acme/app::deploy-main', policy: { cancelInProgress: true, max: 1 } });
  });

  it('takes the policy from the workflow concurrency object, defaulting each field', () => {
    const policyOf = (concurrency: LockWorkflow['concurrency']) =>
      onlyJob(workflow([job('deploy', { concurrencyGroup: 'g' })], { concurrency })).concurrency?.policy;
    assert.deepEqual(policyOf({ hasGroup: false, cancelInProgress: false, max: 3 }), { cancelInProgress: false, max: 3 });
    assert.deepEqual(policyOf({ hasGroup: true, cancelInProgress: false }), { cancelInProgress: false, max: 1 });
    assert.deepEqual(policyOf({ hasGroup: true, max: 2 }), { cancelInProgress: true, max: 2 });
  });

  it('uses the resolved value of an inline group and fails the job when it is missing', () => {
    const inline = { _type: 'inline' as const, expression: "(event) => 'deploy-' + event.targetBranch" };
    const wf = workflow([job('deploy', { concurrencyGroup: inline, dynamicConcurrencyGroup: true })]);
    const resolved = onlyJob(wf, { resolvedConcurrencyGroups: { deploy: 'deploy-main' } });
    assert.equal(resolved.concurrency?.key, 'acme/app::deploy-main');
    const missing = onlyJob(wf);
    assert.equal(missing.concurrency, null);
    assert.equal(missing.initFailure?.category, 'dynamic_eval');
  });

  it('gives no group for an absent or empty key, and the same key to every matrix child', () => {
    assert.equal(onlyJob(workflow([job('a')])).concurrency, null);
    assert.equal(onlyJob(workflow([job('a', { concurrencyGroup: '' })])).concurrency, null);
    const { jobs } = plan(workflow([job('t', { concurrencyGroup: 'g', matrix: { _type: 'static', values: ['1', '2'] } })]));
    assert.deepEqual(jobs.map((p) => p.concurrency?.key), ['acme/app::g', 'acme/app::g']);
  });

  it('derives requirements, counting run steps inside parallel groups', () => {
    const matchers = { runsOn: [{ kind: 'regex' as const, source: '^node-2\\d$', flags: '' }], excludeLabels: [{ kind: 'exact' as const, value: 'flaky' }] };
    const parallel = job('p', {
      ...matchers,
      runsOnPick: 'any',
      steps: [{ kind: 'parallel', name: 'checks', failFast: true, children: [{ name: 'lint', hasOutputs: false, run: 'npm run lint' }] }],
    });
    assert.deepEqual(onlyJob(workflow([parallel])).requirements, { ...matchers, runsOnPick: 'any', executor: 'run-steps' });
    assert.equal(onlyJob(workflow([job('plain')])).requirements.executor, 'kici');
  });

  it('sets the job timeout and the cancel grace from the job, and workflow timeout and approval from the workflow', () => {
    const wf = workflow([job('a', { timeout: 900_000, gracePeriod: 60 })], {
      timeout: 3_600_000,
      approval: { clauses: [], when: 'always' },
    });
    const input = plan(wf);
    assert.equal(input.jobs[0]?.timeouts.jobTimeoutMs, 900_000);
    assert.equal(input.jobs[0]?.timeouts.cancelGraceMs, 90_000);
    assert.equal(input.jobs[0]?.timeouts.ackMs, DEFAULT_JOB_TIMEOUTS.ackMs);
    assert.equal(input.workflowTimeoutMs, 3_600_000);
    assert.deepEqual(input.approval, { timeoutMs: 86_400_000 });
    const custom = plan(workflow([job('a')], { approval: { clauses: [], when: 'always', timeoutSeconds: 600 } }));
    assert.deepEqual(custom.approval, { timeoutMs: 600_000 });
    assert.equal(custom.workflowTimeoutMs, null);
    assert.deepEqual([custom.runId, custom.createdAt, custom.workflowName, custom.maxAttempts], ['run-1', 1_000, 'ci', 5]);
  });

  it('plans the lockfile.md §9 example as the spec describes', () => {
    const linux = { kind: 'exact' as const, value: 'kici:os:linux' };
    const wf = workflow(
      [
        job('lint', { runsOn: [linux], steps: [{ name: 'install', hasOutputs: false, run: 'npm ci' }] }),
        job('test', {
          runsOn: [linux],
          needs: ['lint'],
          maxParallel: 2,
          failFast: true,
          matrix: { _type: 'static', values: { node: ['20', '22'] } },
          include: [{ node: '24' }],
          steps: [{ name: 'unit', hasOutputs: false, run: 'npm test' }],
          timeout: 1_800_000,
        }),
        job('deploy', {
          needs: [{ name: 'test', runOn: ['success'] }],
          concurrencyGroup: { _type: 'inline', expression: "(event) => 'deploy-' + event.targetBranch" },
          dynamicConcurrencyGroup: true,
          steps: [{ name: 'ship', hasOutputs: false, run: './deploy.sh' }],
          gracePeriod: 60,
          timeout: 900_000,
        }),
      ],
      { concurrency: { hasGroup: false, cancelInProgress: false, max: 1 }, timeout: 3_600_000 },
    );
    const { jobs } = plan(wf, { resolvedConcurrencyGroups: { deploy: 'deploy-main' } });
    assert.deepEqual(jobs.map((p) => p.key), ['lint', 'test (20)', 'test (22)', 'test (24)', 'deploy']);
    const deploy = jobs.at(-1);
    assert.deepEqual(deploy?.concurrency, { key: 'acme/app::deploy-main', policy: { cancelInProgress: false, max: 1 } });
    assert.equal(deploy?.timeouts.cancelGraceMs, 90_000);
    assert.ok(jobs.every((p) => p.requirements.executor === 'run-steps' && p.initFailure === null));
  });
});
