import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { normalizeGenericEvent, normalizeGitHubEvent } from '../../../src/pipeline/normalize.ts';
import { isDropped } from '../../../src/pipeline/normalized-event.ts';
import type { NormalizedEvent } from '../../../src/pipeline/normalized-event.ts';
import * as gh from './github-payloads.ts';

function normalized(eventName: string, payload: unknown): NormalizedEvent {
  const result = normalizeGitHubEvent(eventName, payload);
  assert.ok(!isDropped(result), isDropped(result) ? result.dropped : '');
  return result;
}

function dropped(eventName: string, payload: unknown): string {
  const result = normalizeGitHubEvent(eventName, payload);
  assert.ok(isDropped(result), `expected ${eventName} to be dropped`);
  return result.dropped;
}

describe('normalizeGitHubEvent: push', () => {
  it('maps a branch push to push at `after`, with sender, installation and clone URL', () => {
    const payload = gh.push('refs/heads/main');
    const event = normalized('push', payload);
    assert.deepEqual(event, {
      envelope: {
        type: 'push',
        targetBranch: 'main',
        payload,
        provider: 'github',
        sourceRepo: 'acme/app',
        senderUsername: 'octocat',
        senderUserId: '583231',
      },
      sha: '0d1a26e67d8f5eaf1f6ba5c57fc3c7d91ac0fd1c',
      ref: 'refs/heads/main',
      repository: 'acme/app',
      cloneUrl: 'https://github.com/acme/app.git',
      installationId: 4242,
    });
    assert.equal(event.envelope.payload, payload, 'the raw body is kept as it is');
  });

  it('keeps slashes in branch names', () => {
    assert.equal(normalized('push', gh.push('refs/heads/release/1.2')).envelope.targetBranch, 'release/1.2');
  });

  it('maps a tag push to tag, never push', () => {
    const event = normalized('push', gh.push('refs/tags/v1.2.0', { base_ref: 'refs/heads/main' }));
    assert.equal(event.envelope.type, 'tag');
    assert.equal(event.envelope.targetBranch, 'v1.2.0');
    assert.equal(event.sha, '0d1a26e67d8f5eaf1f6ba5c57fc3c7d91ac0fd1c');
    assert.equal(event.ref, 'refs/tags/v1.2.0');
  });

  it('drops a deleted-ref push', () => {
    const payload = gh.push('refs/heads/old', { deleted: true, after: '0000000000000000000000000000000000000000' });
    assert.match(dropped('push', payload), /deleted refs\/heads\/old/);
  });

  it('drops a push to a ref that is neither a branch nor a tag', () => {
    assert.match(dropped('push', gh.push('refs/notes/commits')), /neither a branch nor a tag/);
  });
});

describe('normalizeGitHubEvent: pull requests and reviews', () => {
  it('maps a same-repository pull request to its base, head and head commit', () => {
    const event = normalized('pull_request', gh.pullRequest('opened'));
    assert.equal(event.envelope.type, 'pull_request');
    assert.equal(event.envelope.action, 'opened');
    assert.equal(event.envelope.targetBranch, 'main');
    assert.equal(event.envelope.baseBranch, 'main');
    assert.equal(event.envelope.sourceBranch, 'feature/widget');
    assert.equal(event.envelope.isForkPR, false);
    assert.equal(event.sha, 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa');
    assert.equal(event.baseSha, 'bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb');
    assert.equal(event.ref, 'refs/pull/7/head');
  });

  it('flags a pull request from a fork, and one whose head repository is gone', () => {
    assert.equal(normalized('pull_request', gh.pullRequest('synchronize', { headRepo: 'mallory/app' })).envelope.isForkPR, true);
    assert.equal(normalized('pull_request', gh.pullRequest('reopened', { headRepo: null })).envelope.isForkPR, true);
  });

  it('TRUST-4: clones a fork pull request from its head repository, or the base one when the fork is gone', () => {
    assert.equal(normalized('pull_request', gh.pullRequest('synchronize', { headRepo: 'mallory/app' })).cloneUrl, 'https://github.com/mallory/app.git');
    assert.equal(normalized('pull_request', gh.pullRequest('reopened', { headRepo: null })).cloneUrl, 'https://github.com/acme/app.git');
    assert.equal(normalized('pull_request', gh.pullRequest('opened')).cloneUrl, 'https://github.com/acme/app.git', 'not a fork');
    const review = gh.review('approved');
    const forkReview = { ...review, pull_request: { ...review.pull_request, head: { ...review.pull_request.head, repo: gh.repository('mallory/app', 'main') } } };
    assert.equal(normalized('pull_request_review', forkReview).cloneUrl, 'https://github.com/mallory/app.git');
  });

  it('drops a pull request without a base', () => {
    assert.match(dropped('pull_request', gh.pullRequest('opened', { base: false })), /without a base/);
  });

  it('maps pull_request_review to review at the head commit', () => {
    const event = normalized('pull_request_review', gh.review('approved'));
    assert.equal(event.envelope.type, 'review');
    assert.equal(event.envelope.action, 'submitted');
    assert.equal(event.envelope.targetBranch, 'main');
    assert.equal(event.envelope.sourceBranch, 'feature/widget');
    assert.equal(event.envelope.isForkPR, false);
    assert.equal(event.sha, 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa');
  });

  it('maps pull_request_review_comment to review_comment', () => {
    const event = normalized('pull_request_review_comment', gh.reviewComment());
    assert.equal(event.envelope.type, 'review_comment');
    assert.equal(event.envelope.action, 'created');
  });

  it('falls back to the default branch when a review has no base', () => {
    const payload = { ...gh.review('commented'), pull_request: gh.pullRequestObject({ base: false }) };
    assert.equal(normalized('pull_request_review', payload).envelope.targetBranch, 'develop');
  });
});

describe('normalizeGitHubEvent: events read at the default branch head', () => {
  it('maps issue_comment to comment on the default branch', () => {
    const event = normalized('issue_comment', gh.issueComment('/deploy staging', true));
    assert.equal(event.envelope.type, 'comment');
    assert.equal(event.envelope.action, 'created');
    assert.equal(event.envelope.targetBranch, 'develop');
    assert.equal(event.sha, null);
    assert.equal(event.ref, 'refs/heads/develop');
  });

  it('maps repository_dispatch to dispatch with the event type as action', () => {
    const event = normalized('repository_dispatch', gh.repositoryDispatch('deploy'));
    assert.equal(event.envelope.type, 'dispatch');
    assert.equal(event.envelope.action, 'deploy');
    assert.equal(event.sha, null);
  });

  it('maps create and delete to their ref, without action', () => {
    const created = normalized('create', gh.refEvent('v3.0.0', 'tag'));
    assert.equal(created.envelope.type, 'create');
    assert.equal(created.envelope.targetBranch, 'v3.0.0');
    assert.equal(created.envelope.action, undefined);
    assert.equal(created.sha, null);
    const deleted = normalized('delete', gh.refEvent('feature/old', 'branch'));
    assert.equal(deleted.envelope.type, 'delete');
    assert.equal(deleted.envelope.targetBranch, 'feature/old');
  });

  it('maps workflow_run to its head branch, else the default branch', () => {
    const event = normalized('workflow_run', gh.workflowRun('completed', 'build', 'success', 'feature/x'));
    assert.equal(event.envelope.type, 'workflow_run');
    assert.equal(event.envelope.action, 'completed');
    assert.equal(event.envelope.targetBranch, 'feature/x');
    assert.equal(event.sha, null);
    assert.equal(normalized('workflow_run', gh.workflowRun('requested', 'build', null, null)).envelope.targetBranch, 'develop');
  });

  it('maps fork without action, star and watch with it', () => {
    const forked = normalized('fork', { ...gh.fork(), action: 'ignored' });
    assert.equal(forked.envelope.type, 'fork');
    assert.equal(forked.envelope.action, undefined);
    assert.equal(normalized('star', gh.star('created')).envelope.action, 'created');
    const watched = normalized('watch', gh.watch());
    assert.deepEqual([watched.envelope.type, watched.envelope.action, watched.envelope.targetBranch], ['watch', 'started', 'develop']);
  });

  it('uses main when the repository names no default branch', () => {
    const payload = { ...gh.star('created'), repository: gh.repository('acme/app', null) };
    assert.equal(normalized('star', payload).envelope.targetBranch, 'main');
  });
});

describe('normalizeGitHubEvent: release and status', () => {
  it('maps a release on a branch to that branch, read at no named commit (a branch name is no sha)', () => {
    const event = normalized('release', gh.release('published', 'main'));
    assert.equal(event.envelope.type, 'release');
    assert.equal(event.envelope.action, 'published');
    assert.equal(event.envelope.targetBranch, 'main');
    assert.equal(event.sha, null);
    assert.equal(event.ref, 'refs/tags/v2.0.0');
  });

  it('maps a release whose target is a commit id to that commit', () => {
    const sha = 'a'.repeat(40);
    const event = normalized('release', gh.release('published', sha));
    assert.equal(event.sha, sha);
    assert.equal(event.envelope.targetBranch, 'develop', 'the default branch: a commit id names no branch');
  });

  it('falls back to the default branch head when a release has no target', () => {
    const event = normalized('release', gh.release('created', ''));
    assert.equal(event.envelope.targetBranch, 'develop');
    assert.equal(event.sha, null);
  });

  it('maps status to its first branch and its commit', () => {
    const event = normalized('status', gh.status('success', 'ci/build', ['main', 'develop']));
    assert.equal(event.envelope.type, 'status');
    assert.equal(event.envelope.action, undefined);
    assert.equal(event.envelope.targetBranch, 'main');
    assert.equal(event.sha, 'cccccccccccccccccccccccccccccccccccccccc');
    assert.equal(normalized('status', gh.status('failure', 'ci/build', [])).envelope.targetBranch, 'develop');
  });
});

describe('normalizeGitHubEvent: dropped and malformed deliveries', () => {
  it('drops ping and events it does not map', () => {
    assert.match(dropped('ping', gh.ping()), /ignored GitHub event "ping"/);
    for (const name of ['deployment', 'member', 'check_run', '__proto__', 'constructor', '']) {
      assert.match(dropped(name, gh.push('refs/heads/main')), /ignored GitHub event/);
    }
  });

  it('drops a payload that is not an object without throwing', () => {
    for (const payload of [null, undefined, 'push', 42, [gh.push('refs/heads/main')]]) {
      assert.match(dropped('push', payload), /^malformed push: the body is not a JSON object$/);
    }
  });

  it('names the first malformed field', () => {
    const { repository: _repository, ...withoutRepository } = gh.push('refs/heads/main');
    assert.match(dropped('push', withoutRepository), /^malformed push: \$\.repository: /);
    const pr = gh.pullRequest('opened');
    const broken = { ...pr, pull_request: { ...pr.pull_request, head: { ...pr.pull_request.head, sha: 7 } } };
    assert.match(dropped('pull_request', broken), /^malformed pull_request: \$\.pull_request\.head\.sha: /);
    assert.match(dropped('status', { ...gh.status('success', 'ci', []), sha: undefined }), /^malformed status: \$\.sha/);
  });

  it('leaves installation and sender out when the delivery has none', () => {
    const { installation: _installation, sender: _sender, ...bare } = gh.push('refs/heads/main');
    const event = normalized('push', bare);
    assert.equal(event.installationId, null);
    assert.equal(event.envelope.senderUserId, undefined);
    assert.equal(event.envelope.senderUsername, undefined);
  });
});

describe('normalizeGenericEvent', () => {
  it('builds a generic_webhook envelope with source and event type in the payload', () => {
    const body = { level: 'error', project: 'web' };
    const envelope = normalizeGenericEvent('sentry', 'issue', body);
    assert.deepEqual(envelope, {
      type: 'generic_webhook',
      action: 'issue',
      targetBranch: '__generic__',
      payload: { level: 'error', project: 'web', source: 'sentry', eventType: 'issue' },
      provider: 'generic',
    });
    assert.deepEqual(body, { level: 'error', project: 'web' }, 'the caller’s body is not mutated');
  });

  it('leaves action unset for the default event type', () => {
    const envelope = normalizeGenericEvent('deploybot', 'default', { ok: true });
    assert.ok(!isDropped(envelope));
    assert.equal(envelope.action, undefined);
    assert.equal(envelope.payload.eventType, 'default');
  });

  it('drops a body that is not a JSON object', () => {
    assert.ok(isDropped(normalizeGenericEvent('sentry', 'issue', [1, 2])));
    assert.ok(isDropped(normalizeGenericEvent('sentry', 'issue', 'text')));
  });
});
