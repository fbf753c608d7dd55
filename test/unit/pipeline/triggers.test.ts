import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { LockPrTrigger, LockWorkflowRunTrigger } from '../../../machines/lock.types.ts';
import type { EventEnvelope } from '../../../src/pipeline/envelope.ts';
import { normalizeGenericEvent } from '../../../src/pipeline/normalize.ts';
import { isDropped } from '../../../src/pipeline/normalized-event.ts';
import { TriggerPatternError, matchWorkflow, unmatchedTriggerTypes } from '../../../src/pipeline/triggers.ts';
import * as gh from './github-payloads.ts';
import { g, github, matches, r, workflow } from './trigger-helpers.ts';

const pushMain = github('push', gh.push('refs/heads/main'));
const pushFeature = github('push', gh.push('refs/heads/feature/login'));
const tagPush = github('push', gh.push('refs/tags/v1.2.0'));

describe('matchWorkflow: combination', () => {
  it('returns the index of the first matching trigger and skips null entries', () => {
    const wf = workflow('ci', null, { _type: 'tag', patterns: [] }, { _type: 'push', branches: [], paths: [] }, {
      _type: 'push',
      branches: [g('main')],
      paths: [],
    });
    assert.deepEqual(matchWorkflow(wf, pushMain), { matched: true, trigger: 2 });
  });

  it('never matches a workflow without triggers', () => {
    assert.deepEqual(matchWorkflow(workflow('none'), pushMain), { matched: false });
    assert.deepEqual(matchWorkflow({ name: 'bare', jobs: [] }, pushMain), { matched: false });
    assert.deepEqual(matchWorkflow(workflow('nulls', null, null), pushMain), { matched: false });
  });

  it('never matches the types Switchyard does not support, and lists them', () => {
    const wf = workflow(
      'internal',
      { _type: 'workflow_complete' },
      { _type: 'job_complete' },
      { _type: 'lifecycle' },
      { _type: 'push', branches: [], paths: [] },
    );
    const event: EventEnvelope = { type: 'workflow_complete', targetBranch: 'main', payload: { workflowName: 'x' } };
    assert.deepEqual(matchWorkflow(wf, event), { matched: false });
    assert.deepEqual(unmatchedTriggerTypes([wf]), ['workflow_complete', 'job_complete', 'lifecycle']);
  });
});

describe('matchWorkflow: kici_event (an emitted event)', () => {
  const emitted = (eventName: string, payload: Record<string, unknown>, sourceRepo = 'acme/app'): EventEnvelope => ({
    type: 'kici_event',
    targetBranch: 'main',
    payload: { eventName, payload, sourceRepo, sourceRunId: 'r1', sourceJobKey: 'build', chainDepth: 1, trustTier: 'trusted' },
  });

  it('matches the event name, then match and not over the emitted payload, then the sending repository', () => {
    const trigger = { _type: 'kici_event' as const, eventName: 'deployed' };
    assert.equal(matches(trigger, emitted('deployed', {})), true);
    assert.equal(matches(trigger, emitted('built', {})), false);
    assert.equal(matches({ ...trigger, match: { '$.env': 'prod' } }, emitted('deployed', { env: 'prod' })), true);
    assert.equal(matches({ ...trigger, match: { '$.env': 'prod' } }, emitted('deployed', { env: 'staging' })), false);
    assert.equal(matches({ ...trigger, not: { '$.dryRun': true } }, emitted('deployed', { dryRun: true })), false);
    assert.equal(matches({ ...trigger, source: 'acme/app' }, emitted('deployed', {})), true);
    assert.equal(matches({ ...trigger, source: 'acme/other' }, emitted('deployed', {})), false);
    assert.equal(matches(trigger, { type: 'push', targetBranch: 'main', payload: { eventName: 'deployed' } }), false, 'only an emitted event');
  });

  it('the match paths read the emitted payload, never the fields the coordinator adds around it', () => {
    const trigger = { _type: 'kici_event' as const, eventName: 'deployed', match: { '$.trustTier': 'trusted' } };
    assert.equal(matches(trigger, emitted('deployed', {})), false);
  });
});

describe('matchWorkflow: push and tag', () => {
  it('matches branches by glob or regex, any branch when empty', () => {
    assert.equal(matches({ _type: 'push', branches: [g('main')], paths: [] }, pushMain), true);
    assert.equal(matches({ _type: 'push', branches: [g('main')], paths: [] }, pushFeature), false);
    assert.equal(matches({ _type: 'push', branches: [g('feature/*')], paths: [] }, pushFeature), true);
    assert.equal(matches({ _type: 'push', branches: [r('^feature/')], paths: [] }, pushFeature), true);
    assert.equal(matches({ _type: 'push', branches: [r('^MAIN$', 'i')], paths: [] }, pushMain), true);
    assert.equal(matches({ _type: 'push', branches: [], paths: [] }, pushFeature), true);
  });

  it('never matches a tag push with a push trigger, even an unfiltered one', () => {
    assert.equal(matches({ _type: 'push', branches: [], paths: [] }, tagPush), false);
    assert.equal(matches({ _type: 'push', branches: [g('**')], paths: [] }, tagPush), false);
  });

  it('matches tag patterns against the tag name, and nothing but tag pushes', () => {
    assert.equal(matches({ _type: 'tag', patterns: [g('v*')] }, tagPush), true);
    assert.equal(matches({ _type: 'tag', patterns: [r('^v\\d+\\.\\d+\\.\\d+$')] }, tagPush), true);
    assert.equal(matches({ _type: 'tag', patterns: [g('release-*')] }, tagPush), false);
    assert.equal(matches({ _type: 'tag', patterns: [] }, pushMain), false);
  });
});

describe('matchWorkflow: pull requests', () => {
  const pr = (fields: Partial<LockPrTrigger> = {}): LockPrTrigger => ({
    _type: 'pr',
    events: [],
    targetBranches: [],
    sourceBranches: [],
    paths: [],
    ...fields,
  });
  const opened = github('pull_request', gh.pullRequest('opened'));

  it('filters events against the action', () => {
    assert.equal(matches(pr({ events: ['opened', 'synchronize'] }), opened), true);
    assert.equal(matches(pr({ events: ['closed'] }), opened), false);
    assert.equal(matches(pr(), opened), true);
  });

  it('filters target and source branches', () => {
    assert.equal(matches(pr({ targetBranches: [g('main')] }), opened), true);
    assert.equal(matches(pr({ targetBranches: [g('release/*')] }), opened), false);
    assert.equal(matches(pr({ sourceBranches: [g('feature/*')] }), opened), true);
    assert.equal(matches(pr({ sourceBranches: [g('fix/*')] }), opened), false);
  });

  it('fails a source branch filter when the event has no source branch', () => {
    const { sourceBranch: _sourceBranch, ...withoutSource } = opened;
    assert.equal(matches(pr({ sourceBranches: [g('**')] }), withoutSource), false);
  });

  it('needs a pull_request event', () => {
    assert.equal(matches(pr(), pushMain), false);
  });
});

describe('matchWorkflow: comments and reviews', () => {
  const onPr = github('issue_comment', gh.issueComment('/deploy staging', true));
  const onIssue = github('issue_comment', gh.issueComment('thanks!', false));

  it('filters comment actions, source and body', () => {
    assert.equal(matches({ _type: 'comment', actions: ['created'] }, onPr), true);
    assert.equal(matches({ _type: 'comment', actions: ['edited'] }, onPr), false);
    assert.equal(matches({ _type: 'comment', actions: [], source: 'pr' }, onPr), true);
    assert.equal(matches({ _type: 'comment', actions: [], source: 'pr' }, onIssue), false);
    assert.equal(matches({ _type: 'comment', actions: [], source: 'issue' }, onIssue), true);
    assert.equal(matches({ _type: 'comment', actions: [], bodyMatch: r('^/deploy\\b') }, onPr), true);
    assert.equal(matches({ _type: 'comment', actions: [], bodyMatch: r('^/deploy\\b') }, onIssue), false);
    assert.equal(matches({ _type: 'comment', actions: [], bodyMatch: g('/deploy *') }, onPr), true);
  });

  it('filters review actions and states, case-insensitively', () => {
    const approved = github('pull_request_review', gh.review('approved'));
    assert.equal(matches({ _type: 'review', actions: ['submitted'], states: ['approved'] }, approved), true);
    assert.equal(matches({ _type: 'review', actions: [], states: ['APPROVED'] }, approved), true);
    assert.equal(matches({ _type: 'review', actions: [], states: ['changes_requested'] }, approved), false);
    assert.equal(matches({ _type: 'review', actions: ['dismissed'], states: [] }, approved), false);
  });

  it('filters review_comment, release, star and watch by action and type', () => {
    const reviewComment = github('pull_request_review_comment', gh.reviewComment());
    assert.equal(matches({ _type: 'review_comment', actions: ['created'] }, reviewComment), true);
    assert.equal(matches({ _type: 'review_comment', actions: ['deleted'] }, reviewComment), false);
    const published = github('release', gh.release('published', 'main'));
    assert.equal(matches({ _type: 'release', actions: ['published'] }, published), true);
    assert.equal(matches({ _type: 'release', actions: ['prereleased'] }, published), false);
    const starred = github('star', gh.star('created'));
    assert.equal(matches({ _type: 'star', actions: [] }, starred), true);
    assert.equal(matches({ _type: 'star', actions: ['deleted'] }, starred), false);
    assert.equal(matches({ _type: 'watch', actions: [] }, starred), false);
    assert.equal(matches({ _type: 'watch', actions: ['started'] }, github('watch', gh.watch())), true);
  });
});

describe('matchWorkflow: dispatch, refs, status, workflow_run, fork', () => {
  it('filters dispatch types against the action', () => {
    const deploy = github('repository_dispatch', gh.repositoryDispatch('deploy'));
    assert.equal(matches({ _type: 'dispatch', types: ['deploy'] }, deploy), true);
    assert.equal(matches({ _type: 'dispatch', types: ['rollback'] }, deploy), false);
  });

  it('filters create and delete by ref type and ref pattern', () => {
    const createdTag = github('create', gh.refEvent('v3.0.0', 'tag'));
    assert.equal(matches({ _type: 'create', refTypes: ['tag'], patterns: [g('v*')] }, createdTag), true);
    assert.equal(matches({ _type: 'create', refTypes: ['branch'], patterns: [] }, createdTag), false);
    assert.equal(matches({ _type: 'create', refTypes: [], patterns: [g('release/*')] }, createdTag), false);
    assert.equal(matches({ _type: 'delete', refTypes: [], patterns: [] }, createdTag), false);
    const deletedBranch = github('delete', gh.refEvent('feature/old', 'branch'));
    assert.equal(matches({ _type: 'delete', refTypes: ['branch'], patterns: [g('feature/**')] }, deletedBranch), true);
  });

  it('filters status contexts by glob and states', () => {
    const success = github('status', gh.status('success', 'ci/build', ['main']));
    assert.equal(matches({ _type: 'status', contexts: ['ci/*'], states: ['success'] }, success), true);
    assert.equal(matches({ _type: 'status', contexts: ['lint'], states: [] }, success), false);
    assert.equal(matches({ _type: 'status', contexts: [], states: ['failure', 'error'] }, success), false);
  });

  it('filters workflow_run by action, workflow name and conclusion', () => {
    const done = github('workflow_run', gh.workflowRun('completed', 'build', 'success', 'main'));
    const run = (fields: Partial<LockWorkflowRunTrigger>): LockWorkflowRunTrigger => ({
      _type: 'workflow_run',
      actions: [],
      workflows: [],
      conclusions: [],
      ...fields,
    });
    assert.equal(matches(run({ actions: ['completed'], workflows: ['build'], conclusions: ['success'] }), done), true);
    assert.equal(matches(run({ workflows: ['deploy'] }), done), false);
    assert.equal(matches(run({ conclusions: ['failure'] }), done), false);
    assert.equal(matches(run({ actions: ['requested'] }), done), false);
  });

  it('matches fork only on fork events', () => {
    assert.equal(matches({ _type: 'fork' }, github('fork', gh.fork())), true);
    assert.equal(matches({ _type: 'fork' }, pushMain), false);
  });
});

describe('matchWorkflow: webhook, generic_webhook and schedule', () => {
  it('lets the catch-all webhook accept the listed types and actions', () => {
    const starred = github('star', gh.star('created'));
    assert.equal(matches({ _type: 'webhook', events: ['star', 'fork'], actions: [] }, starred), true);
    assert.equal(matches({ _type: 'webhook', events: ['fork'], actions: [] }, starred), false);
    assert.equal(matches({ _type: 'webhook', events: [], actions: ['created'] }, starred), true);
    assert.equal(matches({ _type: 'webhook', events: ['star'], actions: ['deleted'] }, starred), false);
  });

  it('matches a generic webhook by exact source, event type and JSONPath match / not', () => {
    const result = normalizeGenericEvent('sentry', 'issue', { level: 'error', tags: [{ env: 'prod' }] });
    assert.ok(!isDropped(result));
    const base = { _type: 'generic_webhook', source: 'sentry' } as const;
    assert.equal(matches({ ...base, events: ['issue'], match: { '$.level': 'error', '$.tags[0].env': 'prod' } }, result), true);
    assert.equal(matches({ ...base, source: 'Sentry' }, result), false);
    assert.equal(matches({ ...base, events: ['alert'] }, result), false);
    assert.equal(matches({ ...base, match: { "$['level']": 'warning' } }, result), false);
    assert.equal(matches({ ...base, not: { 'tags[0].env': 'prod' } }, result), false);
    assert.equal(matches({ ...base, not: { '$.level': 'info' } }, result), true);
    assert.equal(matches({ ...base, match: { '$.missing': 'x' } }, result), false);
  });

  it('falls back to the action when the payload has no eventType', () => {
    const event: EventEnvelope = {
      type: 'generic_webhook',
      action: 'build',
      targetBranch: '__generic__',
      payload: { source: 'jenkins' },
    };
    assert.equal(matches({ _type: 'generic_webhook', source: 'jenkins', events: ['build'] }, event), true);
  });

  it('refuses an unsupported JSONPath', () => {
    const result = normalizeGenericEvent('sentry', 'issue', { items: [] });
    assert.ok(!isDropped(result));
    assert.throws(() => matches({ _type: 'generic_webhook', source: 'sentry', match: { '$..id': 1 } }, result), TriggerPatternError);
  });

  it('matches a schedule with the identical cron expression only', () => {
    const tick: EventEnvelope = { type: 'schedule', targetBranch: 'main', payload: { cronExpression: '0 3 * * *' } };
    assert.equal(matches({ _type: 'schedule', cronExpression: '0 3 * * *', timezone: 'UTC' }, tick), true);
    assert.equal(matches({ _type: 'schedule', cronExpression: '0 4 * * *', timezone: 'UTC' }, tick), false);
    assert.equal(matches({ _type: 'schedule', cronExpression: '0 3 * * *', timezone: 'UTC' }, pushMain), false);
  });
});
