import assert from 'node:assert/strict';
import { beforeEach, describe, it } from 'node:test';
import type { LockFile } from '../../../machines/lock.types.ts';
import type { Delivery } from '../../../src/db/deliveries.ts';
import type { RepositoryRegistration } from '../../../src/db/repositories.ts';
import { LockFileCache } from '../../../src/lockfile/cache.ts';
import { runPipeline } from '../../../src/pipeline/pipeline.ts';
import type { SourceBase } from '../../../src/pipeline/run-source.ts';
import type { RunStarter } from '../../../src/pipeline/start-runs.ts';
import { ContributorCache } from '../../../src/pipeline/trust.ts';
import { testLog } from '../../support/database.ts';
import { GitHubPeer } from '../../support/github-peer.ts';
import { lockFileWith, pushWorkflow } from '../../support/lock-repo.ts';
import * as gh from '../../unit/pipeline/github-payloads.ts';

const HEAD = 'a'.repeat(40);
const BASE = 'b'.repeat(40);
const PERMISSION = '/repos/acme/app/collaborators/octocat/permission';
const contents = (sha: string) => `/repos/acme/app/contents/.kici/kici.lock.json?ref=${sha}`;
const prWorkflow = (name: string) => ({ ...pushWorkflow(name, []), triggers: [{ _type: 'pr', events: [], targetBranches: [], sourceBranches: [], paths: [] }] });

/** TRUST-2/4 through the pipeline: a GitHub repository's pull request senders are looked up with its token. */
describe('pull request trust on a GitHub repository (a local GitHub peer)', () => {
  const peer = new GitHubPeer();
  let started: { workflows: string[]; source: SourceBase }[] = [];
  const startRuns: RunStarter = {
    matched: (_delivery, lock: LockFile, source) => {
      started.push({ workflows: lock.workflows.map((w) => w.name), source });
      return Promise.resolve([]);
    },
    corrupt: () => Promise.resolve([]),
  };
  const githubApiUrl = peer.forSuite();
  const contributors = new ContributorCache();
  const deliver = (deliveryId: string) => {
    const delivery: Delivery = { source: 'github', deliveryId, eventName: 'pull_request', headers: {}, body: Buffer.from(JSON.stringify(gh.pullRequest('synchronize'))), receivedAt: 0, status: 'processing', attempts: 0 };
    const deps = { repository: () => Promise.resolve(repo), genericSourceRepository: () => Promise.resolve(null), cache: new LockFileCache(), startRuns, log: testLog, githubApiUrl: githubApiUrl(), contributors };
    return runPipeline(deps, delivery);
  };

  const repo: RepositoryRegistration = { name: 'acme/app', provider: 'github', path: null, cloneUrl: null, defaultBranch: 'main', token: 'ghp_registered' };
  beforeEach(() => {
    contributors.clear();
    started = [];
    peer.answers.set(contents(HEAD), { status: 200, body: lockFileWith([prWorkflow('from-head')]), contentType: 'application/vnd.github.raw' });
    peer.answers.set(contents(BASE), { status: 200, body: lockFileWith([prWorkflow('from-base')]), contentType: 'application/vnd.github.raw' });
  });

  const permission = (role: string, id = 583231) => ({ status: 200, body: JSON.stringify({ permission: role, role_name: role, user: { login: 'octocat', id } }) });

  it('a collaborator with write permission runs the pull request\'s own lock file; the answer is cached', async () => {
    peer.answers.set(PERMISSION, permission('write'));
    await deliver('pr-1');
    assert.deepEqual(started.map((s) => [s.workflows, s.source.trustTier, s.source.lockFileSource, s.source.workflowChangesIgnored]), [[['from-head'], 'trusted', 'head', undefined]]);
    assert.equal(peer.requests.find((r) => r.url === PERMISSION)?.headers.authorization, 'Bearer ghp_registered', 'asked with the registration\'s token');
    await deliver('pr-2');
    assert.equal(peer.requests.filter((r) => r.url === PERMISSION).length, 1, 'the second delivery used the cached permission');
  });

  it('a reader, a login now naming someone else, or a failed lookup reads the base lock file', async () => {
    for (const answer of [permission('read'), permission('write', 999), { status: 502, body: '{}' }]) {
      contributors.clear();
      peer.answers.set(PERMISSION, answer);
      await deliver('pr-x');
    }
    assert.deepEqual(started.map((s) => [s.workflows, s.source.trustTier]), [
      [['from-base'], 'known'],
      [['from-base'], 'unknown'],
      [['from-base'], 'unknown'],
    ]);
    for (const { source } of started) {
      assert.equal(source.lockFileSource, 'base');
      assert.equal(source.workflowChangesIgnored, true, 'the head commit changes the workflows: its runs say the changes were not run');
    }
  });

  it('TRUST-4: a base-read pull request whose head has the same workflows records no ignored changes; a head that cannot be read holds no run back', async () => {
    peer.answers.set(PERMISSION, permission('read'));
    peer.answers.set(contents(HEAD), { status: 200, body: lockFileWith([prWorkflow('from-base')]), contentType: 'application/vnd.github.raw' });
    await deliver('pr-same');
    assert.deepEqual(started.map((s) => [s.workflows, s.source.lockFileSource, s.source.workflowChangesIgnored]), [[['from-base'], 'base', undefined]]);
    peer.answers.set(contents(HEAD), { status: 503, body: '{}' });
    await deliver('pr-head-down');
    assert.deepEqual(started.slice(1).map((s) => [s.workflows, s.source.lockFileSource, s.source.workflowChangesIgnored]), [[['from-base'], 'base', undefined]]);
  });
});
