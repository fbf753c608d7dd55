import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import type { LockFile, LockPattern, LockPrTrigger, LockPushTrigger } from '../../../machines/lock.types.ts';
import { parseLockFile } from '../../../src/lockfile/parse.ts';
import {
  TriggerPatternError,
  matchWorkflow,
  matchWorkflows,
  workflowNeedsChangedFiles,
} from '../../../src/pipeline/triggers.ts';
import { FIXTURES, specExampleText } from '../lockfile/helpers.ts';
import * as gh from './github-payloads.ts';
import { g, github, matches, r, workflow } from './trigger-helpers.ts';

const push = (fields: Partial<LockPushTrigger> = {}): LockPushTrigger => ({ _type: 'push', branches: [], paths: [], ...fields });
const pushMain = (changedFiles?: string[]) => github('push', gh.push('refs/heads/main'), changedFiles);

function parsed(text: string | Buffer): LockFile {
  const result = parseLockFile(text);
  assert.ok(result.ok, result.ok ? '' : result.error.message);
  return result.lock;
}

function matchedNames(lock: LockFile, event: ReturnType<typeof github>): string[] {
  return matchWorkflows(lock.workflows, event).flatMap((entry) => {
    assert.notEqual(entry.outcome, 'error');
    return entry.outcome === 'matched' ? [entry.workflow.name] : [];
  });
}

describe('matchWorkflow: paths', () => {
  const paths = ['src/**', 'package.json', '!**/*.md'];

  it('matches when a remaining changed file is included', () => {
    assert.equal(matches(push({ paths }), pushMain(['src/app.ts', 'README.md'])), true);
    assert.equal(matches(push({ paths }), pushMain(['package.json'])), true);
  });

  it('does not match when every changed file is excluded', () => {
    assert.equal(matches(push({ paths }), pushMain(['README.md', 'docs/guide.md', 'src/notes.md'])), false);
  });

  it('does not match when no remaining file is included', () => {
    assert.equal(matches(push({ paths }), pushMain(['test/app.test.ts'])), false);
  });

  it('matches whatever remains with a list of only exclusions', () => {
    assert.equal(matches(push({ paths: ['!docs/**'] }), pushMain(['docs/a.md', 'src/a.ts'])), true);
    assert.equal(matches(push({ paths: ['!docs/**'] }), pushMain(['docs/a.md'])), false);
  });

  it('does not match non-empty paths with no changed files', () => {
    assert.equal(matches(push({ paths }), pushMain([])), false);
    assert.equal(matches(push({ paths: ['!docs/**'] }), pushMain([])), false);
  });

  it('includes dotfiles in globs', () => {
    assert.equal(matches(push({ paths: ['**/*.yml'] }), pushMain(['.github/ci.yml'])), true);
  });

  it('refuses to guess when the changed files were never computed', () => {
    assert.throws(() => matches(push({ paths }), pushMain()), TriggerPatternError);
    assert.equal(matches(push(), pushMain()), true);
  });

  it('applies to pull requests too', () => {
    const pr: LockPrTrigger = { _type: 'pr', events: [], targetBranches: [], sourceBranches: [], paths: ['src/**'] };
    assert.equal(matches(pr, github('pull_request', gh.pullRequest('opened'), ['src/x.ts'])), true);
    assert.equal(matches(pr, github('pull_request', gh.pullRequest('opened'), ['README.md'])), false);
  });

  it('says which workflows need changed files for an event type', () => {
    const pr: LockPrTrigger = { _type: 'pr', events: [], targetBranches: [], sourceBranches: [], paths: ['src/**'] };
    assert.equal(workflowNeedsChangedFiles(workflow('a', push({ paths: ['src/**'] })), 'push'), true);
    assert.equal(workflowNeedsChangedFiles(workflow('a', push({ paths: ['src/**'] })), 'pull_request'), false, 'a push trigger never matches a pull request');
    assert.equal(workflowNeedsChangedFiles(workflow('p', push(), pr), 'pull_request'), true);
    assert.equal(workflowNeedsChangedFiles(workflow('p', push(), pr), 'push'), false);
    assert.equal(workflowNeedsChangedFiles(workflow('b', null, push(), { _type: 'tag', patterns: [] }), 'push'), false);
    assert.equal(workflowNeedsChangedFiles({ name: 'c', jobs: [] }, 'push'), false);
  });
});

describe('matchWorkflow: repos', () => {
  const event = pushMain();
  const repos = (...patterns: LockPattern[]) => push({ repos: patterns });

  it('matches included repositories by glob or regex', () => {
    assert.equal(matches(repos(g('acme/*')), event), true);
    assert.equal(matches(repos(g('other/*')), event), false);
    assert.equal(matches(repos(r('^acme/(app|web)$')), event), true);
  });

  it('checks exclusions first', () => {
    assert.equal(matches(repos(g('acme/*'), g('!acme/app')), event), false);
    assert.equal(matches(repos(g('!acme/legacy-*')), event), true);
    assert.equal(matches(repos(r('!^acme/')), event), false);
  });

  it('fails non-empty repos when the event has no source repository', () => {
    const { sourceRepo: _sourceRepo, ...anonymous } = event;
    assert.equal(matches(repos(g('!nothing/*')), anonymous), false);
    assert.equal(matches(push(), anonymous), true);
  });
});

describe('matchWorkflows: isolation', () => {
  it('B15: a workflow whose trigger throws does not stop the others', () => {
    const redos = workflow('redos', push({ branches: [r('^(a+)+$')] }));
    const broken = workflow('broken', push({ branches: [r('(unclosed')] }));
    const workflows = [workflow('first', push()), redos, workflow('quiet', { _type: 'fork' }), broken, workflow('last', push())];
    const outcomes = matchWorkflows(workflows, pushMain());
    assert.deepEqual(
      outcomes.map((entry) => [entry.workflow.name, entry.outcome]),
      [
        ['first', 'matched'],
        ['redos', 'error'],
        ['quiet', 'no_match'],
        ['broken', 'error'],
        ['last', 'matched'],
      ],
    );
    const [, redosOutcome] = outcomes;
    assert.ok(redosOutcome?.outcome === 'error' && redosOutcome.error instanceof TriggerPatternError);
    assert.match(redosOutcome.error.message, /ReDoS/);
  });

  it('refuses a ReDoS-prone regex even in a hand-built workflow', () => {
    assert.throws(() => matchWorkflow(workflow('w', push({ branches: [r('(a|b*)+')] })), pushMain()), /ReDoS/);
  });
});

describe('matchWorkflows: the KiCI fixtures and the §9 example', () => {
  const fixture = (file: string) => parsed(readFileSync(join(FIXTURES, file)));

  it('matches every fixture workflow on a push to main, and none on a tag push', () => {
    for (const file of readdirSync(FIXTURES).filter((name) => name.endsWith('.lock.json'))) {
      const lock = fixture(file);
      assert.deepEqual(matchedNames(lock, pushMain()), lock.workflows.map((wf) => wf.name), file);
      assert.deepEqual(matchedNames(lock, github('push', gh.push('refs/tags/v1.0.0'))), [], file);
    }
  });

  it('matches only branch-agnostic workflows on a push to a feature branch', () => {
    const feature = github('push', gh.push('refs/heads/feature/x'));
    assert.deepEqual(matchedNames(fixture('hello-fanout-chain.lock.json'), feature), ['hello-world']);
    assert.deepEqual(matchedNames(fixture('dyn.lock.json'), feature), []);
    assert.deepEqual(matchedNames(fixture('multi.lock.json'), feature), ['parallel-checks']);
  });

  it('matches the monorepo ci workflow on pull request events through its first trigger', () => {
    const lock = fixture('multi.lock.json');
    const ci = lock.workflows.find((wf) => wf.name === 'ci');
    assert.ok(ci);
    assert.deepEqual(matchWorkflow(ci, github('pull_request', gh.pullRequest('closed'))), { matched: true, trigger: 0 });
    assert.deepEqual(matchWorkflow(ci, github('pull_request', gh.pullRequest('edited'))), { matched: false });
    assert.deepEqual(matchedNames(lock, github('push', gh.push('refs/heads/master'))), ['parallel-checks', 'wait-for-marker']);
  });

  it('matches the §9 example as written', () => {
    const lock = parsed(specExampleText());
    const ci = lock.workflows[0];
    assert.ok(ci);
    assert.deepEqual(matchWorkflow(ci, pushMain(['README.md'])), { matched: true, trigger: 0 });
    assert.deepEqual(matchWorkflow(ci, github('push', gh.push('refs/heads/release/2.0'), [])), { matched: true, trigger: 0 });
    const pr = (files: string[]) => github('pull_request', gh.pullRequest('opened'), files);
    assert.deepEqual(matchWorkflow(ci, pr(['src/index.ts'])), { matched: true, trigger: 1 });
    assert.deepEqual(matchWorkflow(ci, pr(['README.md'])), { matched: false }, 'a PR touching only README.md matches nothing');
    assert.deepEqual(matchWorkflow(ci, github('pull_request', gh.pullRequest('closed'), ['src/a.ts'])), { matched: false });
  });
});
